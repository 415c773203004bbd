"""extractive_summary and count_words: the summary auto-recall injects instead of full text."""

from __future__ import annotations

import pytest

from memoryd.core.errors import InvalidArgument
from memoryd.core.summarize import count_words, extractive_summary

STORY = (
    "Alice moved to Berlin in 2024. "
    "The weather was nice. "
    "She leads the Postgres migration at Acme. "
    "Random filler here. "
    "The Acme Postgres migration finished in March."
)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", 0),
        ("   ", 0),
        ("Hello, world — ok!", 3),
        ("state-of-the-art tool", 2),
        ("我喜欢喝茶。", 5),
        ("コーヒーが好き", 7),
        ("東京タワー", 5),
        ("저는 커피를 좋아해요", 3),
        ("Ich mag Käse.", 3),
        ("Mám rád čaj", 3),
        ("我用Rust写代码", 6),
        ("... --- !!!", 0),
    ],
)
def test_count_words(text: str, words: int) -> None:
    assert count_words(text) == words


@pytest.mark.parametrize(
    ("text", "max_words", "expected"),
    [
        ("  I prefer tea.  ", 150, "I prefer tea."),
        ("one two three", 3, "one two three"),
        ("line one\n\nline two", 150, "line one\n\nline two"),
        ("我住在北京。", 5, "我住在北京。"),
        ("", 150, ""),
        ("   \n ", 150, ""),
    ],
)
def test_short_text_is_returned_trimmed_and_unchanged(
    text: str, max_words: int, expected: str
) -> None:
    assert extractive_summary(text, max_words) == expected


@pytest.mark.parametrize(
    ("max_words", "expected"),
    [
        (6, "Alice moved to Berlin in 2024."),
        # The richest sentence that fits joins the first one; filler does not.
        (
            13,
            "Alice moved to Berlin in 2024. The Acme Postgres migration finished in March.",
        ),
        (
            20,
            "Alice moved to Berlin in 2024. She leads the Postgres migration at Acme. "
            "The Acme Postgres migration finished in March.",
        ),
    ],
)
def test_long_text_keeps_first_and_most_informative_sentences_in_order(
    max_words: int, expected: str
) -> None:
    summary = extractive_summary(STORY, max_words)
    assert summary == expected
    assert count_words(summary) <= max_words


def test_first_sentence_wins_over_a_richer_later_one() -> None:
    text = "Short intro. " + "Postgres Acme Berlin migration rollout schedule details. " * 3
    assert extractive_summary(text, 9).startswith("Short intro.")


@pytest.mark.parametrize(
    ("text", "max_words", "expected"),
    [
        ("one two three four five six", 3, "one two three…"),
        ("Alpha, beta, gamma, delta", 2, "Alpha, beta…"),
        ("我住在北京很多年了", 4, "我住在北…"),
        ("저는 서울에서 오래 살았어요", 2, "저는 서울에서…"),
    ],
)
def test_overlong_first_sentence_is_cut_at_a_word_boundary(
    text: str, max_words: int, expected: str
) -> None:
    assert extractive_summary(text, max_words) == expected


def test_cjk_text_without_spaces_is_split_into_sentences() -> None:
    text = "我住在北京。我喜欢喝茶！今天天气很好。北京的茶很好喝。"
    summary = extractive_summary(text, 12)
    assert summary == "我住在北京。北京的茶很好喝。"


def test_japanese_sentences_are_joined_without_spaces() -> None:
    text = "私は東京に住んでいます。毎朝コーヒーを飲みます。東京の冬は寒いです。"
    summary = extractive_summary(text, 20)
    assert " " not in summary
    assert summary.startswith("私は東京に住んでいます。")
    assert count_words(summary) <= 20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Use e.g. the blue one. Mr. Smith agreed with that plan. Short one here.",
            "Use e.g. the blue one. Short one here.",
        ),
        (
            "Das ist z. B. ein Satz. Noch ein Satz folgt hier heute. Kurz hier.",
            "Das ist z. B. ein Satz. Kurz hier.",
        ),
    ],
)
def test_abbreviations_do_not_end_sentences(text: str, expected: str) -> None:
    assert extractive_summary(text, 9) == expected


def test_lines_are_sentences() -> None:
    text = "Groceries:\n- milk and eggs\n- bread\n- a very long list item " + "x " * 50
    summary = extractive_summary(text, 6)
    assert summary == "Groceries: - milk and eggs - bread"


@pytest.mark.parametrize(
    "text",
    [STORY, "word " * 400, "字" * 500, "a. " * 300, "Ok! " * 200, "x" * 5000],
)
@pytest.mark.parametrize("max_words", [1, 2, 10, 150])
def test_never_empty_and_never_over_budget(text: str, max_words: int) -> None:
    summary = extractive_summary(text, max_words)
    assert summary
    assert count_words(summary) <= max_words


def test_max_words_must_be_positive() -> None:
    with pytest.raises(InvalidArgument, match="max_words"):
        extractive_summary("anything", 0)
