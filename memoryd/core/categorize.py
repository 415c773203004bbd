"""Guess the category of a memory from its text: preference, decision, entity, fact, other.

Used when a memory arrives without a category (auto-capture, or ``Store`` with
``CATEGORY_UNSPECIFIED``). The rules are phrase tables in six languages (English, German,
Chinese, Japanese, Korean, Czech), tried in tiers; the first tier with a hit wins:

    tier  category    typical cues
    1     DECISION    "we decided", "we will use", "let's go with", "wir haben entschieden",
                      "我们决定", "ことにした", "하기로 했", "rozhodli jsme"
    2     PREFERENCE  "I prefer/like/love/hate/want", "my favourite", "ich bevorzuge",
                      "我喜欢", "好き", "좋아해", "preferuji"
    3     DECISION    standing rules: "from now on", "going forward", "ab jetzt", "以后",
                      "今後", "앞으로", "od teď"
    4     ENTITY      an e-mail address, a phone number, a URL, "X is my colleague",
                      "my name is", "heißt", "是我的同事", "という名前", "제 동료", "jmenuje se"
    5     FACT        a statement with "is/has/lives in/works at", a number or a date,
                      "ist/hat/wohnt", "是/有/住在", "です/にある", "입니다/있어요", "je/má/bydlí"
    -     OTHER       nothing matched, or a question that only matched FACT cues

Improvements over the OpenClaw ``detectCategory`` it replaces: Latin-script cues match
whole words only ("like" no longer fires inside "likely", "is" not inside "this"), the
subject is required where a bare verb is ambiguous ("I like", not any "like"), explicit
decisions win over the preferences they mention, and a question is not filed as a fact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memoryd.core.records import Category

__all__ = ["CONTACT_DETAILS", "detect_category"]


def _latin(*phrases: str) -> str:
    """Whole-word alternatives for scripts that separate words with spaces."""
    return r"(?<!\w)(?:" + "|".join(phrases) + r")(?!\w)"


def _cjk(*phrases: str) -> str:
    """Substring alternatives for scripts without spaces (Chinese, Japanese) and Korean
    stems, whose particles and endings attach directly to the word."""
    return "(?:" + "|".join(phrases) + ")"


def _compile(parts: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(parts), re.IGNORECASE)


# Anchored at the start of a token: without the lookbehind a long run of letters is
# retried from every position (quadratic time).
_EMAIL = r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}"
# Phone numbers in the shapes people write them, but not dates ("2026-03-01") or
# amounts: international "+420 777 123 456", North American "(555) 123-4567", domestic
# with a trunk zero "030 12345678" / "090-1234-5678", Czech "777 123 456", and Chinese
# mobile "13812345678".
_PHONE = "|".join(
    [
        r"\+\d[\d ()./-]{6,}\d",
        r"(?<!\d)\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?!\d)",
        r"(?<!\d)\(?0\d{1,4}\)?[ /-]\d{3,}(?:[ -]\d{2,})*(?!\d)",
        r"(?<!\d)\d{3} \d{3} \d{3}(?!\d)",
        r"(?<!\d)1[3-9]\d{9}(?!\d)",
    ]
)
_URL = r"\b(?:https?://|www\.)\S+"

# An e-mail address or a phone number; auto-capture treats one as a reason to remember.
CONTACT_DETAILS = re.compile(f"{_EMAIL}|{_PHONE}", re.IGNORECASE)

_DECISION_EXPLICIT = _compile(
    [
        # English
        _latin(
            r"we(?:'ve| have)? decided",
            r"i(?:'ve| have)? decided",
            r"(?:it )?was decided",
            r"we(?:'ve| have)? agreed",
            r"we(?:'ve| have)? chosen",
            r"we(?:'ll| will| are going to|'re going to) "
            r"(?:use|go with|switch to|adopt|stick with)",
            r"let'?s (?:go with|use|stick with|switch to)",
            r"the decision is",
            r"decision:",
            r"we settled on",
        ),
        # German
        _latin(
            # The participle closes the clause: "wir haben uns für Postgres entschieden".
            r"wir haben (?:\S+ ){0,6}?(?:entschieden|beschlossen|geeinigt)",
            r"ich habe (?:\S+ ){0,6}?entschieden",
            r"wir (?:werden|wollen) \w+ (?:verwenden|nutzen|benutzen|einsetzen)",
            r"wir nehmen",
            r"entscheidung:",
            r"beschlossen",
        ),
        # Czech
        _latin(
            r"rozhodli jsme se",
            r"rozhodl(?:a)? jsem se",
            r"dohodli jsme se",
            r"budeme používat",
            r"použijeme",
            r"rozhodnutí:",
        ),
        # Chinese, Japanese, Korean
        _cjk(
            "我们决定",
            "我决定",
            "决定了",
            "决定用",
            "决定使用",
            "就用",
            "定下来",
            "决策",
            "ことにした",
            "ことにしました",
            "に決めた",
            "に決めました",
            "決定しました",
            "決まりました",
            "にしましょう",
            "하기로 했",
            "하기로 결정",
            "결정했",
            "사용하기로",
            "로 하자",
        ),
    ]
)

_PREFERENCE = _compile(
    [
        # English: a first-person subject is required for the common verbs ("like" is
        # also a preposition); "prefer" and "favourite" are unambiguous on their own.
        _latin(
            r"(?:i|we)(?: really| do| don't| do not| would|'d)? "
            r"(?:prefer|like|love|enjoy|hate|dislike|detest|want|can't stand)",
            r"i'?d rather",
            r"i would rather",
            r"prefers?",
            r"preferred",
            r"preference",
            r"(?:my|our) favou?rite",
            r"favou?rite",
        ),
        # German
        _latin(
            r"ich (?:bevorzuge|mag|liebe|hasse|möchte|will)",
            r"mir gefällt",
            r"bevorzug\w*",
            r"lieber",
            r"am liebsten",
            r"(?:mein|meine|meinen|unser|unsere) lieblings\w*",
            r"lieblings\w*",
            r"ich kann \w+ nicht (?:leiden|ausstehen)",
        ),
        # Czech
        _latin(
            r"preferuj[iu]",
            r"preferuje\w*",
            r"mám r[áa]d[a]?",
            r"nemám r[áa]d[a]?",
            r"miluj[iu]",
            r"nesnáším",
            r"chci",
            r"nechci",
            r"radši",
            r"raději",
            r"oblíben\w*",
        ),
        # Chinese, Japanese, Korean
        _cjk(
            "我喜欢",
            "我更喜欢",
            "我比较喜欢",
            "我不喜欢",
            "我偏好",
            "偏好",
            "我爱",
            "我讨厌",
            "我想要",
            "我习惯",
            "最喜欢",
            "更喜欢",
            "が好き",
            "好きです",
            "大好き",
            "が嫌い",
            "嫌いです",
            "苦手",
            "好み",
            "お気に入り",
            "の方がいい",
            "のほうがいい",
            "がいいです",
            "좋아해",
            "좋아합니다",
            "좋아하는",
            "싫어해",
            "싫어합니다",
            "선호",
            "원해",
            "원합니다",
        ),
    ]
)

_DECISION_STANDING = _compile(
    [
        _latin(
            r"from now on",
            r"going forward",
            r"henceforth",
            r"ab (?:jetzt|sofort)",
            r"von nun an",
            r"künftig",
            r"zukünftig",
            r"od (?:teď|této chvíle)",
            r"odteď",
            r"napříště",
        ),
        _cjk(
            "以后",
            "今后",
            "从现在开始",
            "从今往后",
            "今後",
            "これからは",
            "앞으로",
            "이제부터",
        ),
    ]
)

_ENTITY = _compile(
    [
        _EMAIL,
        _PHONE,
        _URL,
        # English: a person and who they are to the user, a name, contact details.
        _latin(
            r"is (?:my|our) (?:\w+ )?"
            r"(?:colleague|coworker|co-worker|boss|manager|friend|wife|husband|partner|"
            r"brother|sister|mother|father|mom|mum|dad|son|daughter|doctor|dentist|lawyer|"
            r"teacher|neighbou?r|client|customer|contact|assistant|cousin|uncle|aunt)",
            r"(?:my|his|her|their) name is",
            r"(?:is|am) called",
            r"(?:is|was) named",
            r"phone number",
            r"e-?mail(?: address)? is",
            r"contact (?:is|details)",
        ),
        # German
        _latin(
            r"ist (?:mein|meine|unser|unsere) \w*"
            r"(?:kollege|kollegin|chef|chefin|freund|freundin|frau|mann|bruder|schwester|"
            r"mutter|vater|sohn|tochter|arzt|ärztin|zahnarzt|anwalt|nachbar|nachbarin|kunde|"
            r"kundin|kontakt)",
            r"(?:ich )?heiße",
            r"heißt",
            r"heisst",
            r"mein name ist",
            r"telefonnummer",
        ),
        # Czech
        _latin(
            r"je (?:můj|moje|má|náš|naše) \w*"
            r"(?:kolega|kolegyně|šéf|šéfová|přítel|přítelkyně|kamarád|kamarádka|manžel|"
            r"manželka|bratr|sestra|matka|otec|syn|dcera|lékař|lékařka|zubař|soused|sousedka|"
            r"klient|kontakt)",
            r"jmenuj[eiu]",
            r"jmenuje se",
            r"telefonní číslo",
        ),
        # Chinese, Japanese, Korean
        _cjk(
            r"是我的(?:同事|朋友|老板|上司|经理|老婆|妻子|丈夫|老公|哥哥|姐姐|弟弟|妹妹|"
            r"妈妈|爸爸|儿子|女儿|医生|律师|老师|邻居|客户|联系人)",
            "我叫",
            "名字叫",
            "名字是",
            "叫做",
            "电话号码",
            "联系方式",
            "邮箱",
            r"は(?:私|僕|俺)の(?:同僚|友達|友人|上司|妻|夫|兄|姉|弟|妹|母|父|息子|娘|医者|"
            r"先生|隣人|顧客)",
            "という名前",
            "と申します",
            "電話番号",
            "連絡先",
            "メールアドレス",
            r"(?:제|내|우리) (?:동료|친구|상사|매니저|아내|남편|형|누나|오빠|언니|동생|엄마|"
            r"아빠|아들|딸|의사|변호사|선생님|이웃|고객)",
            "이름은",
            "전화번호",
            "연락처",
            "이메일",
        ),
    ]
)

_FACT = _compile(
    [
        r"\d",
        _latin(
            r"is",
            r"am",
            r"i'm",
            r"are",
            r"was",
            r"were",
            r"has",
            r"have",
            r"had",
            r"lives? in",
            r"works? (?:at|for|in|on)",
            r"born",
            r"uses",
            r"runs on",
            r"located",
            # German
            r"ist",
            r"sind",
            r"war",
            r"hat",
            r"haben",
            r"wohnt",
            r"wohne",
            r"arbeitet",
            r"arbeite",
            r"liegt",
            # Czech
            r"je",
            r"jsou",
            r"byl[ao]?",
            r"má",
            r"mají",
            r"bydlí",
            r"bydlím",
            r"pracuje",
            r"pracuji",
        ),
        _cjk(
            "是",
            "有",
            "住在",
            "在.{1,12}工作",
            "位于",
            "です",
            "でした",
            "である",
            "にある",
            "にいる",
            "がある",
            "に住んで",
            "で働いて",
            "입니다",
            "이에요",
            "예요",
            "있어요",
            "있습니다",
            "살아요",
            "살고 있",
            "에서 일해",
            "에서 일합니다",
        ),
    ]
)

# A question mark at the end, unless it only closes a tag question ("..., ok?").
_QUESTION_END = re.compile(r"(?<!\bok)(?<!\bokay)(?<!\bright)(?<!\byes)[?？]\s*$", re.IGNORECASE)

_TIERS: tuple[tuple[re.Pattern[str], Category], ...] = (
    (_DECISION_EXPLICIT, Category.DECISION),
    (_PREFERENCE, Category.PREFERENCE),
    (_DECISION_STANDING, Category.DECISION),
    (_ENTITY, Category.ENTITY),
)


def detect_category(text: str) -> Category:
    """The category a memory with this text most likely belongs to.

    Never returns ``Category.UNSPECIFIED``; text that matches no rule is ``OTHER``.
    """
    # Typographic apostrophes ("let’s", "I’d") are as common as ASCII ones.
    text = text.replace("\u2019", "'")
    for pattern, category in _TIERS:
        if pattern.search(text):
            return category
    if _FACT.search(text) and not _QUESTION_END.search(text):
        return Category.FACT
    return Category.OTHER
