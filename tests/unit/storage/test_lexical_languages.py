"""Language-aware BM25 analysis: each text in its own language, mixed text by script."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from memoryd.core.language import detect
from memoryd.core.records import Category, Memory
from memoryd.storage.hot_index import HotIndex
from memoryd.storage.lexical import Analyzer

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("The user prefers dark mode in every editor", "en"),
        ("Der Nutzer bevorzugt den dunklen Modus in jedem Editor", "de"),
        ("用户在每个编辑器里都喜欢深色模式", "zh"),
        ("ユーザーはどのエディタでもダークモードが好きです", "ja"),
        ("사용자는 모든 편집기에서 다크 모드를 선호합니다", "ko"),
        ("Uživatel dává přednost tmavému režimu v každém editoru", "cs"),
        ("El usuario prefiere el modo oscuro en todos los editores", "es"),
        ("Пользователь предпочитает тёмную тему во всех редакторах", "ru"),
        ("يفضل المستخدم الوضع الداكن في كل محرر", "ar"),
        ("ผู้ใช้ชอบโหมดมืดในทุกโปรแกรมแก้ไข", "th"),
        ("Người dùng thích chế độ tối trong mọi trình soạn thảo", "vi"),
        # short chat lines the detector is unsure of stay in the default language
        ("Jon: Bye!", "en"),
        ("Gina: ;)", "en"),
    ],
)
def test_detects_the_language_of_a_sentence(text: str, code: str) -> None:
    assert detect(text) == code


def test_each_language_gets_its_own_stemmer_and_stop_words() -> None:
    a = Analyzer()
    # German plural and singular meet; English stemming would not have joined them
    assert a.terms("die Häuser", "de") == a.terms("das Haus", "de") == ["haus"]
    # Russian case endings meet ("неделе" / "неделя"), and "на" is a stop word
    assert a.terms("на неделе", "ru") == a.terms("неделя", "ru")
    # Spanish: "las", "de" dropped, plural folded
    assert a.terms("las casas de Lisboa", "es") == a.terms("casa lisboa", "es")
    # English keeps its behaviour
    assert a.terms("The runners were running", "en") == ["runner", "run"]


def test_mixed_text_is_analysed_by_script() -> None:
    a = Analyzer()
    # a Latin word in Russian text is analysed as English, the Cyrillic ones as Russian
    assert a.terms("Мы перешли на Kubernetes", "ru") == [
        *a.terms("Мы перешли на", "ru"),
        *a.terms("Kubernetes", "en"),
    ]
    # Chinese runs become bigrams, the Latin word beside them a word
    assert a.terms("iPhone手机很好", "zh") == ["iphon", "手机", "机很", "很好"]
    # Thai (no spaces, vowel signs are marks) becomes character trigrams
    thai = a.terms("โหมดมืด", "th")
    assert thai[0] == "โหม" and len(thai) == len("โหมดมืด") - 2


def test_a_query_meets_memories_in_its_own_language_and_the_scopes_languages() -> None:
    index = HotIndex(4)
    v = np.array([1, 0, 0, 0], dtype=np.float32)
    texts = [
        "Die Hochzeit meiner Schwester findet in Lissabon statt",
        "Unser Server braucht mehr Speicherplatz",
        "Die Katze heißt Miso",
    ]
    for i, text in enumerate(texts):
        index.put(
            Memory(
                id=str(i), agent_id="a", scope="s", text=text, summary="",
                category=Category.FACT, importance=0.5, created_at=NOW, updated_at=NOW,
            ),
            v,
        )  # fmt: skip
    assert {m.language for m in index.visible(["s"], now=NOW)} == {"de"}
    cands = index.candidates(v, "Wo ist die Hochzeit meiner Schwester?", ["s"], 3, now=NOW)
    assert cands.query_language == "de"
    best = int(np.argmax(cands.lexical_scores))
    assert cands.memories[best].id == "0"
    # "Hochzeiten" only meets "Hochzeit" through the German stemmer; a one-word query
    # the detector may not call German still gets the scopes' German analysis
    assert Analyzer().terms("Hochzeiten", "en") != Analyzer().terms("Hochzeiten", "de")
    cands = index.candidates(v, "Hochzeiten", ["s"], 3, now=NOW)
    assert cands.memories[int(np.argmax(cands.lexical_scores))].id == "0"
    assert cands.lexical_scores.max() > 0


def test_an_arabic_word_meets_its_form_with_a_prefix_the_stemmer_keeps() -> None:
    # The Snowball stemmer strips "ال" but keeps "وال" ("and the"): "والمدرسة" stems to
    # "والمدرس", "المدرسة" to "مدرس". The words' character trigrams still meet.
    a = Analyzer()
    stems = {t for t in a.terms("والمدرسة", "ar") if not t.startswith("#")}
    assert "مدرس" not in stems and "مدرس" in a.terms("المدرسة", "ar")
    index = HotIndex(4)
    v = np.array([1, 0, 0, 0], dtype=np.float32)
    texts = ["ذهب أخي إلى السوق والمدرسة صباحا", "السيارة حمراء وجديدة", "القطة اسمها ميسو"]
    for i, text in enumerate(texts):
        index.put(
            Memory(
                id=str(i), agent_id="a", scope="s", text=text, summary="",
                category=Category.FACT, importance=0.5, created_at=NOW, updated_at=NOW,
            ),
            v,
        )  # fmt: skip
    cands = index.candidates(v, "أين المدرسة؟", ["s"], 3, now=NOW)
    assert cands.query_language == "ar"
    best = int(np.argmax(cands.lexical_scores))
    assert cands.memories[best].id == "0" and cands.lexical_scores[best] > 0
    # English words index no trigrams: nothing changes outside the listed languages
    assert not any(t.startswith("#") for t in a.terms("schooling schools", "en"))
