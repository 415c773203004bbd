"""detect_category: the category a captured or stored memory is filed under."""

from __future__ import annotations

import pytest

from memoryd.core.categorize import detect_category
from memoryd.core.records import Category

P, D, E, F, OT = (
    Category.PREFERENCE,
    Category.DECISION,
    Category.ENTITY,
    Category.FACT,
    Category.OTHER,
)

CASES: list[tuple[str, str, Category]] = [
    # English
    ("en-prefer", "I prefer dark mode in every editor", P),
    ("en-like", "I really like short answers", P),
    ("en-hate", "I hate meetings before 10am", P),
    ("en-want", "We want the reports in PDF", P),
    ("en-favourite", "My favourite language is Rust", P),
    ("en-favorite-us", "my favorite color is green", P),
    ("en-rather", "I'd rather use tabs than spaces", P),
    ("en-decided", "We decided to use Postgres for the ledger", D),
    ("en-will-use", "We will use GitHub Actions for CI", D),
    ("en-lets-go-with", "Let's go with the blue logo", D),
    ("en-lets-typographic", "Let\u2019s go with option B", D),
    ("en-from-now-on", "From now on, deploys happen on Tuesdays", D),
    ("en-decision-beats-preference", "We decided on Vim because I like modal editing", D),
    ("en-colleague", "Anna Novak is my colleague on the payments team", E),
    ("en-email", "Reach Bob at bob.smith@example.com", E),
    ("en-phone-intl", "Call the office: +44 20 7946 0958", E),
    ("en-phone-us", "Dentist (555) 123-4567", E),
    ("en-url", "The wiki lives at https://wiki.example.com/team", E),
    ("en-name", "My name is Jonas", E),
    ("en-lives-in", "My sister lives in Lisbon", F),
    ("en-is", "The staging server is behind the VPN", F),
    ("en-number", "Build takes 14 minutes", F),
    ("en-iso-date-is-not-phone", "Launch on 2026-03-01", F),
    ("en-other", "Hmm, okay then", OT),
    ("en-question-is-not-fact", "Where is the staging server?", OT),
    ("en-likely-is-not-like", "Rain likely tomorrow", OT),
    ("en-this-is-not-is", "Thistle and moss", OT),
    ("en-she-likes-is-not-first-person", "Tom likes jazz", OT),
    # German
    ("de-bevorzuge", "Ich bevorzuge kurze Antworten", P),
    ("de-mag", "Ich mag keinen Kaffee", P),
    ("de-lieblings", "Mein Lieblingseditor ist Emacs", P),
    ("de-entschieden", "Wir haben uns für Postgres entschieden", D),
    ("de-ab-jetzt", "Ab jetzt laufen Releases montags", D),
    ("de-kollegin", "Anna ist meine Kollegin aus Wien", E),
    ("de-heisst", "Mein Chef heißt Herr Weber", E),
    ("de-phone", "Praxis: 030 12345678", E),
    ("de-wohnt", "Meine Mutter wohnt in Graz", F),
    ("de-ist", "Der Server steht im Keller und ist alt", F),
    ("de-other", "Na gut, dann eben so", OT),
    # Chinese
    ("zh-like", "我喜欢喝绿茶", P),
    ("zh-prefer", "我偏好简短的回答", P),
    ("zh-favourite", "最喜欢的编辑器是Vim", P),
    ("zh-decided", "我们决定用Postgres", D),
    ("zh-from-now", "以后都用中文回答", D),
    ("zh-colleague", "张伟是我的同事", E),
    ("zh-mobile", "他的手机13812345678", E),
    ("zh-lives", "我住在上海", F),
    ("zh-is", "服务器是新的", F),
    ("zh-other", "嗯嗯", OT),
    # Japanese
    ("ja-suki", "コーヒーが好きです", P),
    ("ja-nigate", "辛い料理は苦手", P),
    ("ja-decided", "Rustを使うことにしました", D),
    ("ja-kongo", "今後は敬語で話してください", D),
    ("ja-colleague", "田中さんは私の同僚です", E),
    ("ja-phone", "携帯は090-1234-5678", E),
    ("ja-lives", "東京に住んでいます", F),
    ("ja-other", "なるほどね", OT),
    # Korean
    ("ko-like", "저는 커피를 좋아해요", P),
    ("ko-prefer", "짧은 답변을 선호합니다", P),
    ("ko-decided", "우리는 Postgres를 사용하기로 했어요", D),
    ("ko-from-now", "앞으로는 한국어로 답해 주세요", D),
    ("ko-colleague", "민수는 제 동료예요", E),
    ("ko-phone", "제 번호는 010-1234-5678", E),
    ("ko-lives", "서울에 살아요", F),
    ("ko-other", "음 그렇군", OT),
    # Czech
    ("cs-preferuji", "Preferuji tmavý režim", P),
    ("cs-mam-rad", "Mám rád krátké odpovědi", P),
    ("cs-radsi", "Radši čaj než kávu", P),
    ("cs-rozhodli", "Rozhodli jsme se pro Postgres", D),
    ("cs-od-ted", "Od teď piš česky", D),
    ("cs-kolega", "Petr je můj kolega z Brna", E),
    ("cs-phone", "Zavolej na 777 123 456", E),
    ("cs-jmenuje", "Můj pes se jmenuje Rex", E),
    ("cs-bydli", "Sestra bydlí v Olomouci", F),
    ("cs-other", "No nevím", OT),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_detect_category(text: str, expected: Category) -> None:
    assert detect_category(text) is expected


@pytest.mark.parametrize("text", ["", "   ", "?", "🙂", "x" * 10_000] + [c[1] for c in CASES])
def test_never_unspecified(text: str) -> None:
    assert detect_category(text) is not Category.UNSPECIFIED


def test_case_does_not_matter() -> None:
    assert detect_category("I PREFER DARK MODE") is Category.PREFERENCE
    assert detect_category("WE DECIDED TO SHIP FRIDAY") is Category.DECISION
