"""Time expressions in queries resolve to calendar windows in the caller's time zone."""

from __future__ import annotations

import random
import re
import re._constants as sre
import re._parser as sre_parse
import unicodedata
from datetime import UTC, datetime

import pytest

from memoryd.core import timewindow
from memoryd.core.errors import InvalidArgument
from memoryd.core.timewindow import resolve, zone

BERLIN = zone("Europe/Berlin")
NEW_YORK = zone("America/New_York")


def window(query: str, ref: datetime, tz: str = "UTC") -> tuple[datetime, datetime] | None:
    w = resolve(query, ref, zone(tz))
    return None if w is None else (w.start, w.end)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# Wednesday 18 March 2026, noon UTC: last week is Monday 9 March to Monday 16 March.
REF = utc(2026, 3, 18, 12)
LAST_WEEK = (utc(2026, 3, 9), utc(2026, 3, 16))
YESTERDAY = (utc(2026, 3, 17), utc(2026, 3, 18))


@pytest.mark.parametrize(
    "query",
    [
        "what did I say last week?",
        "Was habe ich letzte Woche gesagt?",
        "上周我说了什么？",
        "先週何と言いましたか",
        "지난주에 뭐라고 했어?",
        "Co jsem říkal minulý týden?",
        "¿Qué dije la semana pasada?",
        "Что я говорил на прошлой неделе?",
    ],
)
def test_last_week_in_eight_languages(query: str) -> None:
    assert window(query, REF) == LAST_WEEK


@pytest.mark.parametrize(
    "query",
    [
        "what did we decide yesterday",
        "Was haben wir gestern entschieden?",
        "我们昨天决定了什么",
        "昨日何を決めましたか",
        "어제 무엇을 결정했나요",
        "Co jsme včera rozhodli?",
        "¿Qué decidimos ayer?",
        "Что мы решили вчера?",
    ],
)
def test_yesterday_in_eight_languages(query: str) -> None:
    assert window(query, REF) == YESTERDAY


@pytest.mark.parametrize(
    "query",
    [
        "what did we decide in March",
        "Was haben wir im März entschieden?",
        "我们3月决定了什么",
        "三月的决定",
        "3月に何を決めましたか",
        "3월에 무엇을 결정했나요",
        "Co jsme rozhodli v březnu?",
        "¿Qué decidimos en marzo?",
        "Что мы решили в марте?",
    ],
)
def test_a_named_month_is_the_latest_one_not_after_the_reference(query: str) -> None:
    assert window(query, REF) == (utc(2026, 3, 1), utc(2026, 4, 1))
    # asked in February, "March" is last year's March
    assert window(query, utc(2026, 2, 10)) == (utc(2025, 3, 1), utc(2025, 4, 1))


def test_month_ends_and_years() -> None:
    # a month that ends on the 31st, leap February, December into January
    assert window("last month", utc(2026, 3, 31, 23)) == (utc(2026, 2, 1), utc(2026, 3, 1))
    assert window("last month", utc(2024, 3, 1)) == (utc(2024, 2, 1), utc(2024, 3, 1))
    assert window("this month", utc(2025, 12, 31, 23, 59)) == (utc(2025, 12, 1), utc(2026, 1, 1))
    assert window("last month", utc(2026, 1, 1)) == (utc(2025, 12, 1), utc(2026, 1, 1))
    assert window("2 months ago", utc(2026, 1, 31)) == (utc(2025, 11, 1), utc(2025, 12, 1))
    assert window("in May 2023", REF) == (utc(2023, 5, 1), utc(2023, 6, 1))
    assert window("2023年10月的会议", REF) == (utc(2023, 10, 1), utc(2023, 11, 1))
    assert window("去年", REF) == (utc(2025, 1, 1), utc(2026, 1, 1))
    assert window("vor 3 Tagen", REF) == (utc(2026, 3, 15), utc(2026, 3, 16))
    assert window("hace 2 semanas", REF) == (utc(2026, 3, 2), utc(2026, 3, 9))


def test_days_follow_the_callers_time_zone_across_dst_changes() -> None:
    # 01:30 UTC on 30 March 2026 is already Monday 03:30 in Berlin (CEST since Sunday 02:00):
    # "yesterday" there is Sunday 29 March, a 23-hour day.
    start, end = window("gestern", utc(2026, 3, 30, 1, 30), "Europe/Berlin")  # type: ignore[misc]
    assert (start, end) == (utc(2026, 3, 28, 23), utc(2026, 3, 29, 22))
    assert (end - start).total_seconds() == 23 * 3600
    # New York falls back on 1 November 2026: that Sunday lasts 25 hours
    start, end = window("yesterday", utc(2026, 11, 2, 17), "America/New_York")  # type: ignore[misc]
    assert (start, end) == (utc(2026, 11, 1, 4), utc(2026, 11, 2, 5))
    assert (end - start).total_seconds() == 25 * 3600
    # the same instant is a different "today" in Tokyo and in New York
    ref = utc(2026, 6, 30, 20)
    assert window("today", ref, "Asia/Tokyo") == (utc(2026, 6, 30, 15), utc(2026, 7, 1, 15))
    assert window("today", ref, "America/New_York") == (utc(2026, 6, 30, 4), utc(2026, 7, 1, 4))
    # a week across the spring change is 167 hours long
    start, end = window("this week", utc(2026, 3, 26), "Europe/Berlin")  # type: ignore[misc]
    assert (end - start).total_seconds() == 167 * 3600


def test_words_that_only_look_like_dates_resolve_nothing() -> None:
    for query in (
        "May I ask what the user prefers?",
        "what did we decide about the budget",
        "the weekly meeting",
        "Mario's favourite band",
        "der Termin am 3月5日",
    ):
        assert window(query, REF) is None, query


def test_an_unknown_time_zone_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument, match="Mars/Base"):
        zone("Mars/Base")
    # a caller's string is never a path: traversal, absolute paths, NUL, huge names
    for name in ("../../etc/passwd", "/etc/localtime", "Europe/../../etc/passwd", "UTC\x00"):
        with pytest.raises(InvalidArgument, match="not an IANA time zone"):
            zone(name)
    with pytest.raises(InvalidArgument, match="5000 chars"):
        zone("x" * 5000)
    assert zone("") == zone("UTC")


# -- Arabic, Thai, Vietnamese: the same table as the other languages -----------------------
# Wednesday 18 March 2026, as above.
TODAY = (utc(2026, 3, 18), utc(2026, 3, 19))
DAY_BEFORE = (utc(2026, 3, 16), utc(2026, 3, 17))
THIS_WEEK = (utc(2026, 3, 16), utc(2026, 3, 23))
THIS_MONTH = (utc(2026, 3, 1), utc(2026, 4, 1))
LAST_MONTH = (utc(2026, 2, 1), utc(2026, 3, 1))
THIS_YEAR = (utc(2026, 1, 1), utc(2027, 1, 1))
LAST_YEAR = (utc(2025, 1, 1), utc(2026, 1, 1))
THREE_DAYS_AGO = (utc(2026, 3, 15), utc(2026, 3, 16))
TWO_WEEKS_AGO = (utc(2026, 3, 2), utc(2026, 3, 9))
TWO_MONTHS_AGO = (utc(2026, 1, 1), utc(2026, 2, 1))
MARCH = THIS_MONTH
MARCH_2023 = (utc(2023, 3, 1), utc(2023, 4, 1))
MARCH_2025 = (utc(2025, 3, 1), utc(2025, 4, 1))

ARABIC = [
    ("ماذا فعلت اليوم؟", TODAY),
    ("ماذا قررنا أمس؟", YESTERDAY),
    ("ماذا قررنا بالأمس", YESTERDAY),
    ("وامس ذهبنا إلى السوق", YESTERDAY),  # no hamza, و attached
    ("ماذا حدث البارحة؟", YESTERDAY),
    ("ماذا قلت أول أمس؟", DAY_BEFORE),
    ("ماذا قلت اول من امس", DAY_BEFORE),
    ("ماذا قلت الأسبوع الماضي؟", LAST_WEEK),
    ("ماذا قلت في الاسبوع الماضى", LAST_WEEK),  # no hamza, ى for ي
    ("وبالأسبوع الفائت اشترينا سيارة", LAST_WEEK),
    ("ما خططنا لهذا الأسبوع", THIS_WEEK),
    ("ماذا اشترينا الشهر الماضي", LAST_MONTH),
    ("ماذا اشترينا هذا الشهر", THIS_MONTH),
    ("أين سافرنا العام الماضي", LAST_YEAR),
    ("أين سافرنا في السنة الماضية", LAST_YEAR),
    ("أين سنسافر هذا العام", THIS_YEAR),
    ("أين سنسافر هذه السنة", THIS_YEAR),
    ("ماذا قلت منذ 3 أيام", THREE_DAYS_AGO),
    ("ماذا قلت منذ ٣ أيام", THREE_DAYS_AGO),  # Arabic-Indic digits
    ("ماذا قلت قبل ثلاثة أيام", THREE_DAYS_AGO),
    ("ماذا قلت منذ يومين", DAY_BEFORE),  # the dual: two days ago
    ("ماذا قلت قبل أسبوعين", TWO_WEEKS_AGO),
    ("ماذا اشترينا منذ شهرين", TWO_MONTHS_AGO),
    ("ماذا قلت منذ أسبوع", LAST_WEEK),
    ("ماذا اشترينا منذ شهر", LAST_MONTH),
    ("ماذا قررنا في مارس؟", MARCH),
    ("ماذا قررنا في آذار؟", MARCH),
    ("ماذا قررنا في شهر آذار/مارس", MARCH),
    ("ماذا قررنا خلال مارس ٢٠٢٣", MARCH_2023),
    ("اجتماع كانون الثاني 2025", (utc(2025, 1, 1), utc(2025, 2, 1))),
    ("ماذا قررنا في كانون الثاني", (utc(2026, 1, 1), utc(2026, 2, 1))),
    ("ماذا قررنا في مارس من العام الماضي", MARCH_2025),
    ("ماذا قررنا في آذار من عام 2023", MARCH_2023),
    ("ماذا قررنا في آذار/مارس2023", MARCH_2023),
    ("ماذَا فَعَلْتُ أَمْسِ؟", YESTERDAY),  # with vowel marks
]
THAI = [  # unsegmented, as Thai is written
    ("วันนี้ฉันทำอะไร", TODAY),
    ("เมื่อวานเราตัดสินใจอะไร", YESTERDAY),
    ("เราคุยอะไรกันเมื่อวานนี้", YESTERDAY),
    ("เมื่อวานซืนฉันไปไหนมา", DAY_BEFORE),
    ("สัปดาห์ที่แล้วฉันพูดว่าอะไร", LAST_WEEK),
    ("อาทิตย์ที่แล้วเราประชุมเรื่องอะไร", LAST_WEEK),
    ("ในสัปดาห์ที่ผ่านมาฉันทำอะไรบ้าง", LAST_WEEK),
    ("สัปดาห์นี้มีนัดอะไรบ้าง", THIS_WEEK),
    ("เดือนที่แล้วเราซื้ออะไร", LAST_MONTH),
    ("เดือนนี้เราใช้เงินไปเท่าไร", THIS_MONTH),
    ("ปีที่แล้วเราไปเที่ยวที่ไหน", LAST_YEAR),
    ("ปีนี้เราจะไปเที่ยวที่ไหน", THIS_YEAR),
    ("3 วันที่แล้วฉันทำอะไร", THREE_DAYS_AGO),
    ("เมื่อ๓วันก่อนฉันทำอะไร", THREE_DAYS_AGO),  # Thai digits
    ("เมื่อสามวันก่อนฉันทำอะไร", THREE_DAYS_AGO),
    ("สองสัปดาห์ที่แล้วเราคุยเรื่องอะไร", TWO_WEEKS_AGO),
    ("2 เดือนที่แล้วเราซื้ออะไร", TWO_MONTHS_AGO),
    ("เราตัดสินใจอะไรในเดือนมีนาคม", MARCH),
    ("เราตัดสินใจอะไรเดือนมีนา", MARCH),
    ("การประชุมเดือนมีนาคม พ.ศ. 2566", MARCH_2023),  # Buddhist era: 2566 - 543
    ("การประชุมมีนาคม 2566", MARCH_2023),
    ("การประชุม มี.ค. 2566", MARCH_2023),
    ("การประชุมมีนาคม ค.ศ. 2023", MARCH_2023),
    ("การประชุมเดือนมีนาคมปีที่แล้ว", MARCH_2025),
    ("การประชุมในเดือน มีนาคม ปี 2023", MARCH_2023),
]
VIETNAMESE = [
    ("Hôm nay tôi đã làm gì?", TODAY),
    ("Hôm qua chúng ta đã quyết định gì?", YESTERDAY),
    ("Hôm kia tôi đi đâu?", DAY_BEFORE),
    ("Tuần trước tôi đã nói gì?", LAST_WEEK),
    ("Tuần này có cuộc họp nào?", THIS_WEEK),
    ("Tháng trước chúng ta mua gì?", LAST_MONTH),
    ("Tháng này chúng ta tiêu bao nhiêu?", THIS_MONTH),
    ("Năm ngoái chúng ta đi du lịch ở đâu?", LAST_YEAR),
    ("Năm nay chúng ta sẽ đi đâu?", THIS_YEAR),
    ("3 ngày trước tôi đã làm gì?", THREE_DAYS_AGO),
    ("Ba ngày trước tôi đã làm gì?", THREE_DAYS_AGO),
    ("Cách đây 3 ngày tôi đã làm gì?", THREE_DAYS_AGO),
    ("2 tuần trước chúng ta nói về chuyện gì?", TWO_WEEKS_AGO),
    ("Hai tháng trước chúng ta mua gì?", TWO_MONTHS_AGO),
    ("Chúng ta đã quyết định gì vào tháng 3?", MARCH),
    ("Chúng ta đã quyết định gì vào tháng Ba?", MARCH),
    ("cuộc họp tháng 03/2023", MARCH_2023),
    ("cuộc họp tháng 3 năm 2023", MARCH_2023),
    ("cuộc họp tháng 3 năm ngoái", MARCH_2025),
    ("cuộc họp tháng 3, 2023", MARCH_2023),
    ("cuộc họp tháng Năm", (utc(2025, 5, 1), utc(2025, 6, 1))),
]


@pytest.mark.parametrize(("query", "expected"), ARABIC + THAI + VIETNAMESE)
def test_arabic_thai_and_vietnamese_expressions_resolve_to_their_window(
    query: str, expected: tuple[datetime, datetime]
) -> None:
    assert window(query, REF) == expected


@pytest.mark.parametrize(("query", "expected"), VIETNAMESE)
def test_vietnamese_typed_in_nfd_resolves_as_in_nfc(
    query: str, expected: tuple[datetime, datetime]
) -> None:
    decomposed = unicodedata.normalize("NFD", query)
    assert decomposed != query
    assert window(decomposed, REF) == expected


def test_a_thai_expression_inside_an_unsegmented_sentence_names_its_words() -> None:
    w = resolve("พรุ่งนี้ต้องส่งงานที่เราคุยกันเมื่อวานใช่ไหม", REF, zone("Asia/Bangkok"))
    assert w is not None and w.expression == "เมื่อวาน"
    # Bangkok is UTC+7: yesterday there began at 17:00 UTC the day before
    assert (w.start, w.end) == (utc(2026, 3, 16, 17), utc(2026, 3, 17, 17))


@pytest.mark.parametrize(
    "sentence",
    [
        # Arabic: "the next day", "on that day", the verb مارس (practised), a week before an
        # event, a day's date, أمسك (held), "public opinion" / "the current director general",
        # the last century, two more days' dates, "ten times its weight a day"
        "في اليوم التالي ذهب إلى المدرسة",
        "في ذلك اليوم كان الجو جميلا",
        "مارس الرياضة كل صباح قبل العمل",
        "قبل أسبوع من الانتخابات أعلن الحزب برنامجه",
        "وصل الوفد في 5 مارس 2020 إلى القاهرة",
        "أمسك الولد الكرة بيديه",
        "تغير الرأي العام بعد الحرب",
        "استقال المدير العام الحالي للشركة",
        "عاش في القرن الماضي عدد كبير من العلماء",
        "وفي 12 أيار/مايو 1705 صدر القانون",
        "تأكل عشرة أضعاف وزنها في اليوم",
        "استقلت الجامعة في 1 من آب عام 1963",
        # Thai: nowadays, the sun, this Sunday, the past many years, a day's date, three
        # days before the match, a bird's wing, every year, the civil service office (ก.พ.),
        # 66 million years ago
        "ทุกวันนี้ผู้คนใช้โทรศัพท์มือถือกันมาก",
        "ดวงอาทิตย์ขึ้นทางทิศตะวันออก",
        "วันอาทิตย์นี้ฉันจะไปตลาด",
        "หลายปีที่ผ่านมามีการเปลี่ยนแปลงมาก",
        "เขาเกิดเมื่อวันที่ 5 มีนาคม 2500",
        "3 วันก่อนการแข่งขันนักกีฬาได้พักผ่อน",
        "ปีกของนกมีขนสีขาว",
        "ทุกปีที่ผ่านมาเราจัดงานนี้",
        "สำนักงาน ก.พ. ประกาศผลสอบ",
        "ไดโนเสาร์สูญพันธุ์เมื่อ 66 ล้านปีก่อน",
        # Vietnamese: nowadays, a day's date, "months and years", three days before the
        # match, a few weeks ago, the past two years, the week before that, the third year,
        # "for 5 years now", 66 million years ago
        "Ngày nay nhiều người dùng điện thoại",
        "Ông sinh ngày 5 tháng 3 năm 1990",
        "Những tháng năm tuổi trẻ đã qua",
        "Ba ngày trước khi trận đấu diễn ra, đội đã tập luyện",
        "Vài tuần trước có một cơn bão",
        "Hai năm qua công ty đã phát triển nhanh",
        "Tuần trước đó anh ấy bị ốm",
        "Anh ấy học năm thứ ba",
        "5 năm nay anh ấy sống ở Hà Nội",
        "Khủng long tuyệt chủng 66 triệu năm trước",
    ],
)
def test_ordinary_arabic_thai_and_vietnamese_sentences_resolve_nothing(sentence: str) -> None:
    assert window(sentence, REF) is None


def _examples(items: object, rng: random.Random, turn: int) -> str:
    """One text the parsed pattern ``items`` matches (look-arounds aside), letters in a
    random case; each branch takes its alternative number ``turn`` (modulo their number),
    so that consecutive turns go through every alternative (every month of a month rule)."""
    out = []
    for op, av in items:  # type: ignore[attr-defined]
        if op is sre.LITERAL:
            c = chr(av)
            out.append(c.upper() if rng.random() < 0.3 else c)
        elif op is sre.IN:
            picks = []
            for kind, value in av:
                if kind is sre.LITERAL:
                    picks.append(chr(value))
                elif kind is sre.RANGE:
                    picks.append(chr(rng.randint(*value)))
                elif kind is sre.CATEGORY:
                    picks.append({sre.CATEGORY_DIGIT: "7", sre.CATEGORY_SPACE: " "}.get(value, "a"))
            out.append(rng.choice(picks) if picks else " ")
        elif op is sre.BRANCH:
            out.append(_examples(av[1][turn % len(av[1])], rng, turn))
        elif op is sre.SUBPATTERN:
            out.append(_examples(av[-1], rng, turn))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, body = av
            out.extend(
                _examples(body, rng, turn) for _ in range(rng.randint(low, min(high, low + 2)))
            )
        elif op is sre.GROUPREF_EXISTS:  # (?(group)yes|no): the group is seldom there
            out.append(_examples(av[2] if av[2] is not None else av[1], rng, turn))
        elif op is sre.ANY:
            out.append("a")
    return "".join(out)


def _every_rule(query: str) -> list[tuple[object, str]]:
    """What ``matches`` found before its rules were gated: every rule of the query's
    scripts searched (the Latin ones for an ASCII query)."""
    if query.isascii():
        text, scripts = query, {"latin"}
    else:
        text = unicodedata.normalize("NFC", query)
        scripts = {name for name, letters in timewindow._SCRIPTS.items() if letters.search(text)}
        if "arabic" in scripts:
            text = timewindow._AR_MARKS.sub("", text)
    rules = [(p, span) for script, p, span in timewindow._RULES if script in scripts]
    return [(span, m.group()) for m, span in timewindow._search(rules, text)]


def test_a_query_finds_what_every_rule_of_its_scripts_would_find() -> None:
    # A rule searches only a query holding one of its words (a search that starts with a
    # look behind tries every position); a rule skipped that way must never be one that
    # matches, in any script, in ASCII or not.
    rng = random.Random(7)
    hit: set[str] = set()
    ascii_hit: set[str] = set()
    texts = 0
    for _, pattern, _ in timewindow._RULES:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
        for turn in range(40):
            phrase = _examples(parsed, rng, turn)
            for text in (phrase, f"what did we do {phrase}?", f"so,{phrase}.", f"x{phrase}"):
                texts += 1
                every = _every_rule(text)
                assert [(span, m.group()) for m, span in timewindow.matches(text)] == every, text
                found = {p.pattern for p, _ in _rules_of(text) if p.search(_normal(text))}
                hit |= found
                if text.isascii():
                    ascii_hit |= found
    assert texts > 10_000
    # every rule was matched, so every rule's gate was tried with a text it lets through
    assert hit == {p.pattern for _, p, _ in timewindow._RULES}
    # and a rule left out of the ASCII rules is one no ASCII text matched
    assert ascii_hit == {p.pattern for p, _, _ in timewindow._ASCII_RULES}


def _normal(query: str) -> str:
    if query.isascii():
        return query
    text = unicodedata.normalize("NFC", query)
    return timewindow._AR_MARKS.sub("", text) if "arabic" in _scripts(text) else text


def _scripts(text: str) -> set[str]:
    return {name for name, letters in timewindow._SCRIPTS.items() if letters.search(text)}


def _rules_of(query: str) -> list[tuple[re.Pattern[str], object]]:
    scripts = {"latin"} if query.isascii() else _scripts(unicodedata.normalize("NFC", query))
    return [(p, span) for script, p, span in timewindow._RULES if script in scripts]


def test_a_gate_is_never_stricter_about_case_than_its_pattern() -> None:
    # a case-insensitive part of a case-sensitive pattern: its gate takes any case too
    pattern = re.compile(r"(?i:ab)c")
    sets = timewindow._needles_of(pattern)
    gate = timewindow._gate(pattern, sets)
    assert gate is not None and pattern.search("ABc é") and gate.search("ABc é")
    assert timewindow._ascii_needles(sets) == ("ab",)  # lower-cased text: any case
