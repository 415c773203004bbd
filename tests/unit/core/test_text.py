from __future__ import annotations

import pytest

from memoryd.core.text import contains_cjk, content_hash, is_blank, normalize_text


def test_normalisation_makes_equivalent_texts_equal() -> None:
    a = normalize_text("  Cafe\u0301 menu\r\nline two  \r\n")
    b = normalize_text("Caf\u00e9 menu\nline two")
    assert a == b == "Caf\u00e9 menu\nline two"
    assert content_hash(a) == content_hash(b)


def test_different_texts_hash_differently() -> None:
    assert content_hash("a") != content_hash("b")
    assert normalize_text(" \n\t ") == ""


@pytest.mark.parametrize("text", ["", "\x00", " \t\n", "\u200b\ufeff", "\x7f\x01", "\u3000"])
def test_texts_with_nothing_visible_are_blank(text: str) -> None:
    assert is_blank(text)


@pytest.mark.parametrize("text", ["a", "\x00a", "日本", "🙂", "\u200bx", "\U0001fae8", "\ue000"])
def test_texts_with_something_visible_are_not_blank(text: str) -> None:
    assert not is_blank(text)


@pytest.mark.parametrize(
    ("text", "cjk"),
    [
        ("hello", False),
        ("Čeština je fajn", False),
        ("茶", True),
        ("かな", True),
        ("한국어", True),
        ("々", True),
    ],
)
def test_contains_cjk(text: str, cjk: bool) -> None:
    assert contains_cjk(text) is cjk
