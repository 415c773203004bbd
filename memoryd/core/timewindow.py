"""Time expressions in a query ("last week", "letzte Woche", "上周") as a window of time.

``resolve(query, reference, tz)`` finds the first expression it knows and returns the
window it names, [start, end) in UTC, computed on the calendar of the time zone ``tz``
(days start at local midnight, so a window across a DST change is 23 or 25 hours long;
weeks start on Monday). Known, in English, German, Spanish, Russian, Czech, Chinese,
Japanese, Korean, Arabic, Thai and Vietnamese:

    today, yesterday, the day before yesterday
    this / last week, this / last month, this / last year
    N days / weeks / months ago     (that day / week / month)
    in <month> [<year>]             (without a year: the latest such month not after the
                                     reference; "in March" asked in February is last March)

Each script's ways of writing them: Arabic with or without the article and the attached
و ف ب ك ل, with or without hamza (الأسبوع / الاسبوع), ى for ي and ه for ة, vowel marks
ignored, Arabic-Indic digits, the dual (منذ يومين), Western, Levantine and Maghreb month
names (مارس, آذار, آذار/مارس, فيفري); Thai inside an unsegmented sentence, Thai digits
and number words, Buddhist-era years (พ.ศ. 2567 = 2024); Vietnamese in NFC or NFD, number
words (ba ngày trước), "tháng 3" / "tháng Ba". A count before "week" ("3 สัปดาห์ที่ผ่านมา",
"vài tuần trước", "منذ أسابيع") never reads as "last week"; a day of a month ("5 มีนาคม",
"ngày 5 tháng 3", "3月5日") names a day, not the month, and resolves nothing.

Each rule runs only on a query that holds a letter of its script (Thai, Arabic, Cyrillic,
Han/kana/Hangul, ASCII for the Latin-script languages, and for Vietnamese any Latin letter
beyond ASCII): an English query does not run the Thai rules, nor a Thai query the English
ones; and a rule searches only a query that holds one of the words every match of it
needs (worked out from its pattern at import; bench/timeexpr.py measures the cost per
query: ~16 us an English question, 8-80 us in the other languages).

Why not dateparser (checked, 1.5.0): it returns a point in time rather than the span an
expression names ("in March" -> March 15, "last week" -> 7 days ago), read "we" in "what
did we decide" as a date, found nothing in "la semana pasada" or "на прошлой неделе", and
took 1-50 ms per query (215 ms for the first): too slow and too loose for every Recall.
"""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memoryd.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class TimeWindow:
    expression: str  # the words of the query that named it
    start: datetime  # aware, UTC
    end: datetime  # aware, UTC, exclusive

    def contains(self, when: datetime) -> bool:
        return self.start <= when < self.end


def zone(name: str) -> ZoneInfo:
    """An IANA time zone, or InvalidArgument naming the field."""
    if len(name) > 64:  # the longest IANA name is 32 characters
        raise InvalidArgument(f"timezone is {len(name)} chars; IANA names are at most 64")
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: e.g. a name the FS refuses
        raise InvalidArgument(
            f"timezone {name!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)"
        ) from None


# -- calendar arithmetic on local dates ---------------------------------------------------


def _month_start(d: date, back: int = 0) -> date:
    index = d.year * 12 + d.month - 1 - back
    return date(index // 12, index % 12 + 1, 1)


def _day(d: date) -> tuple[date, date]:
    return d, d + timedelta(days=1)


def _week(d: date) -> tuple[date, date]:
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=7)


def _month(d: date) -> tuple[date, date]:
    first = _month_start(d)
    return first, _month_start(first + timedelta(days=32))


def _year(d: date) -> tuple[date, date]:
    return date(d.year, 1, 1), date(d.year + 1, 1, 1)


def _named_month(today: date, month: int, year: int | None) -> tuple[date, date]:
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    return _month(date(year, month, 1))


# -- the expressions ---------------------------------------------------------------------

Span = Callable[[date, "re.Match[str]"], tuple[date, date]]

_CN_DIGITS = {
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


# Number words before a unit ("three days ago"), keyed in _fold's spelling.
_WORD_NUMBERS = {
    # Thai
    "หนึ่ง": 1, "สอง": 2, "สาม": 3, "สี่": 4, "ห้า": 5,
    "หก": 6, "เจ็ด": 7, "แปด": 8, "เก้า": 9, "สิบ": 10,
    # Vietnamese
    "một": 1, "hai": 2, "ba": 3, "bốn": 4, "tư": 4, "năm": 5,
    "sáu": 6, "bảy": 7, "tám": 8, "chín": 9, "mười": 10,
    # Arabic (folded: no hamza, ة as ه)
    "ثلاث": 3, "ثلاثه": 3, "اربع": 4, "اربعه": 4, "خمس": 5, "خمسه": 5, "ست": 6, "سته": 6,
    "سبع": 7, "سبعه": 7, "ثماني": 8, "ثمانيه": 8, "ثمان": 8, "تسع": 9, "تسعه": 9,
    "عشر": 10, "عشره": 10,
}  # fmt: skip

_AR_FOLD = str.maketrans({"أ": "ا", "إ": "ا", "آ": "ا", "ى": "ي", "ة": "ه"})


def _fold(text: str) -> str:
    """Lower case, one space between words, Arabic hamza / alif maqsura / ta marbuta as
    the plain letter: the spelling the lookup tables are keyed in."""
    return " ".join(text.lower().split()).translate(_AR_FOLD)


def _number(text: str) -> int:
    if text.isdigit():  # also Arabic-Indic ٣ and Thai ๓
        return int(text)
    if (word := _WORD_NUMBERS.get(_fold(text))) is not None:
        return word
    if text == "十":
        return 10
    if text.startswith("十"):  # 十一, 十二
        return 10 + _CN_DIGITS[text[1]]
    if text.endswith("十"):
        return _CN_DIGITS[text[0]] * 10
    if "十" in text:
        a, b = text.split("十")
        return _CN_DIGITS[a] * 10 + _CN_DIGITS[b]
    return _CN_DIGITS[text]


def _ago(unit: str) -> Span:
    def span(today: date, m: re.Match[str]) -> tuple[date, date]:
        n = _number(m.group("n"))
        if n > 10_000:
            raise ValueError("too far back")
        if unit == "day":
            return _day(today - timedelta(days=n))
        if unit == "week":
            return _week(today - timedelta(weeks=n))
        return _month(_month_start(today, n))

    return span


def _fixed(kind: str, back: int) -> Span:
    def span(today: date, m: re.Match[str]) -> tuple[date, date]:
        if kind == "day":
            return _day(today - timedelta(days=back))
        if kind == "week":
            return _week(today - timedelta(weeks=back))
        if kind == "month":
            return _month(_month_start(today, back))
        return _year(date(today.year - back, 1, 1))

    return span


def _month_names(names: dict[str, int]) -> Span:
    def span(today: date, m: re.Match[str]) -> tuple[date, date]:
        year = m.groupdict().get("year")
        return _named_month(today, names[m.group("month").lower()], int(year) if year else None)

    return span


def _month_number(today: date, m: re.Match[str]) -> tuple[date, date]:
    month = _number(m.group("month"))
    if not 1 <= month <= 12:
        raise ValueError("no such month")
    year = m.groupdict().get("year")
    return _named_month(today, month, int(year) if year else None)


def _month_of(names: dict[str, int], *, buddhist_era: bool = False) -> Span:
    """A month by name or number (groups ``month...``, the first one set), in the year of
    a ``year...`` group if one is set, last year if ``last_year`` is; with
    ``buddhist_era``, a year after พ.ศ. or past 2400 counts from 543 BCE (2567 = 2024)."""

    def span(today: date, m: re.Match[str]) -> tuple[date, date]:
        groups = m.groupdict()
        word = _fold(next(v for k, v in groups.items() if k.startswith("month") and v))
        month = int(word) if word.isdigit() else names[word]
        if not 1 <= month <= 12:
            raise ValueError("no such month")
        text = next((v for k, v in groups.items() if k.startswith("year") and v), None)
        year = int(text) if text else None
        if year is not None and buddhist_era:
            era = next((v for k, v in groups.items() if k.startswith("era") and v), "")
            era = era.replace(" ", "")
            if era == "พ.ศ." or (not era and year > 2400):
                year -= 543
        if groups.get("last_year"):
            year = today.year - 1
        return _named_month(today, month, year)

    return span


_EN_MONTHS = dict(
    zip(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        range(1, 13),
        strict=True,
    )
)
_DE_MONTHS = dict(
    zip(
        [
            "januar",
            "februar",
            "märz",
            "april",
            "mai",
            "juni",
            "juli",
            "august",
            "september",
            "oktober",
            "november",
            "dezember",
        ],
        range(1, 13),
        strict=True,
    )
)
_ES_MONTHS = dict(
    zip(
        [
            "enero",
            "febrero",
            "marzo",
            "abril",
            "mayo",
            "junio",
            "julio",
            "agosto",
            "septiembre",
            "octubre",
            "noviembre",
            "diciembre",
        ],
        range(1, 13),
        strict=True,
    )
)
_ES_MONTHS["setiembre"] = 9
_RU_MONTHS = dict(  # prepositional case: "в марте"
    zip(
        [
            "январе",
            "феврале",
            "марте",
            "апреле",
            "мае",
            "июне",
            "июле",
            "августе",
            "сентябре",
            "октябре",
            "ноябре",
            "декабре",
        ],
        range(1, 13),
        strict=True,
    )
)
_CS_MONTHS = dict(  # locative: "v březnu"
    zip(
        [
            "lednu",
            "únoru",
            "březnu",
            "dubnu",
            "květnu",
            "červnu",
            "červenci",
            "srpnu",
            "září",
            "říjnu",
            "listopadu",
            "prosinci",
        ],
        range(1, 13),
        strict=True,
    )
)


def _alt(names: dict[str, int]) -> str:
    return "|".join(sorted(names, key=len, reverse=True))


_N = r"(?P<n>\d{1,4})"
_CJK_N = r"(?P<n>\d{1,4}|[一二两三四五六七八九十]{1,3})"
_B, _E = r"(?<![^\W\d_])", r"(?![^\W\d_])"  # word edges that also hold beside CJK text


# -- Arabic, Thai, Vietnamese ---------------------------------------------------------------


def _ar(*phrases: str) -> str:
    """Arabic phrases (longest first) as a pattern that also takes the spellings people
    type: any alif for ا (أ إ آ), ى for a final ي, ة or ه at the end of a word."""
    out = []
    for phrase in sorted(phrases, key=len, reverse=True):
        words = []
        for w in _fold(phrase).split(" "):
            w = w.replace("ا", "\0")
            if w.endswith("ي"):
                w = w[:-1] + "[يى]"
            elif w.endswith("ه"):
                w = w[:-1] + "[هة]"
            words.append(w.replace("\0", "[اأإآ]"))
        out.append(r"\s+".join(words))
    return "(?:" + "|".join(out) + ")"


_AR_MONTHS = {
    _fold(name): number
    for names, number in [
        (("يناير", "كانون الثاني", "جانفي"), 1),
        (("فبراير", "شباط", "فيفري"), 2),
        (("مارس", "آذار"), 3),
        (("أبريل", "إبريل", "نيسان", "أفريل"), 4),
        (("مايو", "أيار"), 5),
        (("يونيو", "يونيه", "حزيران", "جوان"), 6),
        (("يوليو", "يوليه", "تموز", "جويلية", "يوليوز"), 7),
        (("أغسطس", "آب", "أوت", "غشت"), 8),
        (("سبتمبر", "أيلول", "شتنبر"), 9),
        (("أكتوبر", "تشرين الأول"), 10),
        (("نوفمبر", "تشرين الثاني", "نونبر"), 11),
        (("ديسمبر", "كانون الأول", "دجنبر"), 12),
    ]
    for name in names
}
_AR_MONTH = _ar(*_AR_MONTHS)
# The article with the particles that attach to it: الـ وال فال بال كال وبال لل ولل
_AR_THE = r"(?:[وف]?[بك]?ال|[وف]?لل)"
_AR_PAST = _ar("الماضي", "الفائت", "المنصرم", "السابق")
_AR_PAST_F = _ar("الماضية", "الفائتة", "المنصرمة")  # السنة: السابقة is "the year before"
_AR_NOW = _ar("الحالي", "الجاري")
_AR_N = r"(?P<n>\d{1,4}|" + _ar(*(w for w in _WORD_NUMBERS if "\u0600" <= w[0] <= "\u06ff")) + ")"
_AR_AGO = rf"{_B}[وف]?(?:{_ar('منذ')}|{_ar('قبل')})\s+"  # "since" / "before" + a span
_AR_NOT_OF = rf"(?!\s+{_ar('من')}{_E})"  # "قبل أسبوع من الانتخابات": before an event
# منذ يوم / أسبوع / شهر (a day / week / month ago), not منذ يوم الأحد, منذ شهر مارس (since)
_AR_SINCE_ONE = rf"{_B}[وف]?{_ar('منذ')}\s+"
_AR_ONE = rf"(?:\s+{_ar('واحد')})?{_E}(?!\s+(?:ال|{_AR_MONTH}))"
# after a month: 2024, عام 2024, من سنة 2024, and the digits written on ("تموز/يوليو1961")
_AR_YEAR = rf"(?:(?:\s+{_ar('من')})?\s+{_ar('عام', 'سنة')}\s+|\s*)(?P<year>\d{{4}})"
# العام الماضي, السنة الماضية, من العام الماضي (after a month: "March of last year")
_AR_LAST_YEAR = (
    rf"(?:\s+{_ar('من')})?\s*{_AR_THE}(?:{_ar('عام')}\s+{_ar('الماضي', 'الفائت', 'المنصرم')}"
    rf"|{_ar('سنة')}\s+{_AR_PAST_F})"
)

_TH = "[\u0e00-\u0e7f]"
_TH_NUMBER_WORDS = [w for w in _WORD_NUMBERS if "\u0e00" <= w[0] <= "\u0e7f"]
# Not a count before "week": "2 สัปดาห์ที่ผ่านมา", "หลายปีที่แล้ว" (the past 2 weeks, years ago)
_TH_UNCOUNTED = r"(?<!\d)(?<!\d\s)" + "".join(
    f"(?<!{w})"
    for w in [*_TH_NUMBER_WORDS, "หลาย", "บาง", "ทุก", "กี่", "ร้อย", "พัน", "หมื่น", "แสน", "ล้าน"]
)
_TH_N = r"(?<!สิบ)(?<!ยี่)(?<!ร้อย)(?P<n>\d{1,4}|" + "|".join(_TH_NUMBER_WORDS) + ")"
# "ago": ที่แล้ว, ก่อนหน้านี้, or ก่อน closing the phrase or after เมื่อ ("เมื่อ 3 วันก่อน");
# not "3 วันก่อนการแข่งขัน", 3 days before the match
_TH_AGO = rf"\s*(?:ที่แล้ว|ก่อนหน้านี้|ก่อน(?(pre)|(?!{_TH})))"
_TH_LAST = rf"\s*(?:ที่แล้ว|ที่ผ่านมา|ก่อน(?!{_TH}))"
_TH_WEEK = r"(?<!วัน)(?<!ดวง)อาทิตย์"  # อาทิตย์ is also the sun and Sunday (วันอาทิตย์)
_TH_MONTH_NAMES = [
    ("มกราคม", "มกรา", "ม.ค."),
    ("กุมภาพันธ์", "กุมภา", "ก.พ."),
    ("มีนาคม", "มีนา", "มี.ค."),
    ("เมษายน", "เมษา", "เม.ย."),
    ("พฤษภาคม", "พฤษภา", "พ.ค."),
    ("มิถุนายน", "มิถุนา", "มิ.ย."),
    ("กรกฎาคม", "กรกฎา", "ก.ค."),
    ("สิงหาคม", "สิงหา", "ส.ค."),
    ("กันยายน", "กันยา", "ก.ย."),
    ("ตุลาคม", "ตุลา", "ต.ค."),
    ("พฤศจิกายน", "พฤศจิกา", "พ.ย."),
    ("ธันวาคม", "ธันวา", "ธ.ค."),
]
_TH_MONTHS = {name: i for i, names in enumerate(_TH_MONTH_NAMES, 1) for name in names}
_TH_FULL, _TH_SHORT, _TH_ABBR = (
    "|".join(re.escape(names[k]) for names in _TH_MONTH_NAMES) for k in range(3)
)
_TH_YEAR = r"(?:\s*ปี)?(?:\s*(?P<era>พ\.\s?ศ\.|ค\.\s?ศ\.))?\s*(?P<year>\d{4})"
_TH_YEAR_A = _TH_YEAR.replace("<era>", "<era_a>").replace("<year>", "<year_a>")
_NOT_A_DAY = r"(?<!\d)(?<!\d\s)"  # "5 มีนาคม", "5 مارس" name a day, not the month

_VI_N = r"(?<!mười\s)(?P<n>\d{1,4}|một|hai|ba|bốn|tư|năm|sáu|bảy|tám|chín|mười)"
_VI_UNCOUNTED = r"(?<!\d)(?<!\d\s)" + "".join(
    f"(?<!{w}\\s)"
    for w in [
        *("một", "hai", "ba", "bốn", "năm", "sáu", "bảy", "tám", "chín", "mười"),
        *("vài", "mấy", "nhiều", "những", "các", "hàng", "mỗi"),
        *("mươi", "trăm", "nghìn", "ngàn", "triệu", "tỷ"),  # 66 triệu năm trước: 66M years ago
    ]
)
_VI_NOT_RELATIVE = rf"(?!\s+(?:đó|khi){_E})"  # "tuần trước đó", "3 ngày trước khi": before
_VI_AGO = rf"(?(pre)(?:\s+trước(?:\s+đây)?)?|\s+trước(?:\s+đây)?){_E}{_VI_NOT_RELATIVE}"
_VI_MONTHS = {
    "giêng": 1, "một": 1, "hai": 2, "ba": 3, "tư": 4, "bốn": 4, "năm": 5, "sáu": 6,
    "bảy": 7, "tám": 8, "chín": 9, "mười": 10, "mười một": 11, "mười hai": 12, "chạp": 12,
}  # fmt: skip
# "tháng năm" is also "months and years": May only with a capital, "tháng Năm"
_VI_MONTH = (
    r"(?P<month>1[0-2]|0?[1-9])(?!\d)|(?P<month_w>giêng|một|hai|ba|tư|bốn|(?-i:Năm)|sáu|bảy"
    r"|tám|chín|mười\s+một|mười\s+hai|mười|chạp)"
)

# The scripts a rule can need: it runs only on a query holding a letter of its script.
_SCRIPTS = {
    "thai": re.compile("[\u0e00-\u0e7f]"),
    "arabic": re.compile("[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff]"),
    "cyrillic": re.compile("[\u0400-\u052f]"),
    "cjk": re.compile(  # Han, kana, Hangul
        "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
    ),
    "vietnamese": re.compile("[\u00c0-\u024f\u1e00-\u1eff]"),  # any Latin letter beyond ASCII
    "latin": re.compile("[A-Za-z]"),  # every other rule's words hold ASCII letters
}
# A rule's pattern written with letters only Vietnamese uses (ă â đ ê ô ơ ư, ạ-ỹ) is a
# Vietnamese rule; every Vietnamese expression holds a letter beyond ASCII (tháng, hôm).
_VIETNAMESE_ONLY = re.compile("[ăâđêôơưĂÂĐÊÔƠƯ\u1ea0-\u1ef9]")
# Arabic vowel marks and the tatweel: not part of the words' spelling
_AR_MARKS = re.compile("[\u0640\u064b-\u065f\u0670]")


def _script_of(pattern: str) -> str:
    for script in ("thai", "arabic", "cyrillic", "cjk"):
        if _SCRIPTS[script].search(pattern):
            return script
    return "vietnamese" if _VIETNAMESE_ONLY.search(pattern) else "latin"


# Longer expressions first: "the day before yesterday" before "yesterday".
_RULES: list[tuple[str, re.Pattern[str], Span]] = [
    (_script_of(p), re.compile(p, re.IGNORECASE), span)
    for p, span in [
        # the day before yesterday
        (rf"{_B}(?:the\s+)?day\s+before\s+yesterday{_E}", _fixed("day", 2)),
        (rf"{_B}vorgestern{_E}", _fixed("day", 2)),
        (rf"{_B}anteayer{_E}|{_B}antes\s+de\s+ayer{_E}", _fixed("day", 2)),
        (rf"{_B}позавчера{_E}", _fixed("day", 2)),
        (rf"{_B}předevčírem{_E}", _fixed("day", 2)),
        (r"前天|一昨日|おととい|그저께|그제", _fixed("day", 2)),
        (
            rf"{_B}[وف]?ب?{_ar('أول')}\s+(?:{_ar('من')}\s+)?(?:{_AR_THE}|[وفب])?"
            rf"{_ar('أمس', 'بارحة')}{_E}|{_B}[وف]?{_ar('قبل')}\s+{_AR_THE}?{_ar('أمس')}{_E}",
            _fixed("day", 2),
        ),
        (r"(?:เมื่อ)?วานซืน", _fixed("day", 2)),
        (rf"{_B}hôm\s+kia{_E}", _fixed("day", 2)),
        # N units ago
        (rf"{_B}{_N}\s+days?\s+ago{_E}", _ago("day")),
        (rf"{_B}{_N}\s+weeks?\s+ago{_E}", _ago("week")),
        (rf"{_B}{_N}\s+months?\s+ago{_E}", _ago("month")),
        (rf"{_B}vor\s+{_N}\s+tag(?:en)?{_E}", _ago("day")),
        (rf"{_B}vor\s+{_N}\s+wochen?{_E}", _ago("week")),
        (rf"{_B}vor\s+{_N}\s+monat(?:en)?{_E}", _ago("month")),
        (rf"{_B}hace\s+{_N}\s+días?{_E}", _ago("day")),
        (rf"{_B}hace\s+{_N}\s+semanas?{_E}", _ago("week")),
        (rf"{_B}hace\s+{_N}\s+mes(?:es)?{_E}", _ago("month")),
        (rf"{_B}{_N}\s+(?:день|дня|дней)\s+назад{_E}", _ago("day")),
        (rf"{_B}{_N}\s+(?:неделю|недели|недель)\s+назад{_E}", _ago("week")),
        (rf"{_B}{_N}\s+(?:месяц|месяца|месяцев)\s+назад{_E}", _ago("month")),
        (rf"{_B}před\s+{_N}\s+(?:dnem|dny){_E}", _ago("day")),
        (rf"{_B}před\s+{_N}\s+(?:týdnem|týdny){_E}", _ago("week")),
        (rf"{_B}před\s+{_N}\s+(?:měsícem|měsíci){_E}", _ago("month")),
        (rf"{_CJK_N}\s*(?:天|日)前", _ago("day")),
        (rf"{_CJK_N}\s*(?:周|週|週間|个星期|個星期|星期)前", _ago("week")),
        (rf"{_CJK_N}\s*(?:个月|個月|ヶ月|か月|カ月)前", _ago("month")),
        (rf"{_N}\s*일\s*전", _ago("day")),
        (rf"{_N}\s*주\s*전", _ago("week")),
        (rf"{_N}\s*(?:개월|달)\s*전", _ago("month")),
        (rf"{_AR_AGO}{_AR_N}\s+{_ar('أيام', 'يوما', 'يوم')}{_E}{_AR_NOT_OF}", _ago("day")),
        (rf"{_AR_AGO}{_AR_N}\s+{_ar('أسابيع', 'أسبوعا', 'أسبوع')}{_E}{_AR_NOT_OF}", _ago("week")),
        (
            rf"{_AR_AGO}{_AR_N}\s+{_ar('أشهر', 'شهور', 'شهرا', 'شهر')}{_E}{_AR_NOT_OF}",
            _ago("month"),
        ),
        (rf"{_AR_AGO}{_ar('يومين')}{_E}{_AR_NOT_OF}", _fixed("day", 2)),  # the dual: two days
        (rf"{_AR_AGO}{_ar('أسبوعين')}{_E}{_AR_NOT_OF}", _fixed("week", 2)),
        (rf"{_AR_AGO}{_ar('شهرين')}{_E}{_AR_NOT_OF}", _fixed("month", 2)),
        (rf"{_AR_SINCE_ONE}{_ar('يوم')}{_AR_ONE}", _fixed("day", 1)),  # منذ أسبوع: a week ago
        (rf"{_AR_SINCE_ONE}{_ar('أسبوع')}{_AR_ONE}", _fixed("week", 1)),
        (rf"{_AR_SINCE_ONE}{_ar('شهر')}{_AR_ONE}", _fixed("month", 1)),
        (rf"(?P<pre>เมื่อ\s*)?{_TH_N}\s*วัน{_TH_AGO}", _ago("day")),
        (rf"(?P<pre>เมื่อ\s*)?{_TH_N}\s*(?:สัปดาห์|อาทิตย์){_TH_AGO}", _ago("week")),
        (rf"(?P<pre>เมื่อ\s*)?{_TH_N}\s*เดือน{_TH_AGO}", _ago("month")),
        (rf"{_B}(?P<pre>cách\s+đây\s+)?{_VI_N}\s+(?:ngày|hôm){_VI_AGO}", _ago("day")),
        (rf"{_B}(?P<pre>cách\s+đây\s+)?{_VI_N}\s+tuần{_VI_AGO}", _ago("week")),
        (rf"{_B}(?P<pre>cách\s+đây\s+)?{_VI_N}\s+tháng{_VI_AGO}", _ago("month")),
        # yesterday, today
        (rf"{_B}yesterday{_E}", _fixed("day", 1)),
        (rf"{_B}gestern{_E}", _fixed("day", 1)),
        (rf"{_B}ayer{_E}", _fixed("day", 1)),
        (rf"{_B}вчера{_E}", _fixed("day", 1)),
        (rf"{_B}včera{_E}", _fixed("day", 1)),
        (r"昨天|昨日|어제", _fixed("day", 1)),
        (
            rf"{_B}(?:{_AR_THE}|[وفب])?{_ar('أمس')}{_E}|{_B}{_AR_THE}{_ar('بارحة')}{_E}",
            _fixed("day", 1),
        ),
        (r"เมื่อวาน|วานนี้", _fixed("day", 1)),
        (rf"{_B}hôm\s+qua{_E}", _fixed("day", 1)),
        (rf"{_B}today{_E}", _fixed("day", 0)),
        (rf"{_B}heute{_E}", _fixed("day", 0)),
        (rf"{_B}hoy{_E}", _fixed("day", 0)),
        (rf"{_B}сегодня{_E}", _fixed("day", 0)),
        (rf"{_B}dnes{_E}", _fixed("day", 0)),
        (r"今天|今日|오늘", _fixed("day", 0)),
        (  # not ذلك اليوم (that day), في اليوم (a day, per day), اليوم التالي (the day after)
            rf"{_B}(?<!ذلك\s)(?<!تلك\s)(?<!نفس\s)(?<!في\s){_AR_THE}{_ar('يوم')}{_E}(?!\s+ال)",
            _fixed("day", 0),
        ),
        (r"(?<!ทุก)วันนี้", _fixed("day", 0)),  # not ทุกวันนี้, nowadays
        (rf"{_B}hôm\s+nay{_E}", _fixed("day", 0)),
        # weeks
        (rf"{_B}(?:last|past|previous)\s+week{_E}", _fixed("week", 1)),
        (
            rf"{_B}(?:letzte|letzten|vorige|vorigen|vergangene|vergangenen)\s+woche{_E}",
            _fixed("week", 1),
        ),
        (rf"{_B}(?:la\s+)?semana\s+pasada{_E}", _fixed("week", 1)),
        (rf"{_B}(?:на\s+)?прошлой\s+неделе{_E}", _fixed("week", 1)),
        (rf"{_B}minul(?:ý|ém)\s+(?:týden|týdnu){_E}", _fixed("week", 1)),
        (r"上周|上週|上个星期|上個星期|上星期|先週|지난\s*주", _fixed("week", 1)),
        (rf"{_B}{_AR_THE}{_ar('أسبوع')}\s+{_AR_PAST}{_E}", _fixed("week", 1)),
        (rf"{_TH_UNCOUNTED}(?:สัปดาห์|{_TH_WEEK}){_TH_LAST}", _fixed("week", 1)),
        (rf"{_B}{_VI_UNCOUNTED}tuần\s+(?:trước|rồi|qua){_E}{_VI_NOT_RELATIVE}", _fixed("week", 1)),
        (rf"{_B}this\s+week{_E}", _fixed("week", 0)),
        (rf"{_B}diese(?:r)?\s+woche{_E}", _fixed("week", 0)),
        (rf"{_B}esta\s+semana{_E}", _fixed("week", 0)),
        (rf"{_B}(?:на\s+)?этой\s+неделе{_E}", _fixed("week", 0)),
        (rf"{_B}(?:tento|tenhle|tomto)\s+(?:týden|týdnu){_E}", _fixed("week", 0)),
        (r"本周|这周|這週|这个星期|這個星期|今週|이번\s*주", _fixed("week", 0)),
        (
            rf"{_B}[وف]?[بلك]?{_ar('هذا')}\s+{_AR_THE}{_ar('أسبوع')}{_E}"
            rf"|{_B}{_AR_THE}{_ar('أسبوع')}\s+{_AR_NOW}{_E}",
            _fixed("week", 0),
        ),
        (rf"สัปดาห์นี้|{_TH_WEEK}นี้", _fixed("week", 0)),
        (rf"{_B}tuần\s+này{_E}", _fixed("week", 0)),
        # months
        (rf"{_B}(?:last|past|previous)\s+month{_E}", _fixed("month", 1)),
        (rf"{_B}(?:letzten|vorigen|vergangenen)\s+monat{_E}", _fixed("month", 1)),
        (rf"{_B}(?:el\s+)?mes\s+pasado{_E}", _fixed("month", 1)),
        (rf"{_B}(?:в\s+)?прошлом\s+месяце{_E}", _fixed("month", 1)),
        (rf"{_B}minul(?:ý|ém)\s+měsíci?{_E}", _fixed("month", 1)),
        (r"上个月|上個月|上月|先月|지난\s*달", _fixed("month", 1)),
        (rf"{_B}{_AR_THE}{_ar('شهر')}\s+{_AR_PAST}{_E}", _fixed("month", 1)),
        (rf"{_TH_UNCOUNTED}เดือน{_TH_LAST}", _fixed("month", 1)),
        (
            rf"{_B}{_VI_UNCOUNTED}tháng\s+(?:trước|rồi|qua){_E}{_VI_NOT_RELATIVE}",
            _fixed("month", 1),
        ),
        (rf"{_B}this\s+month{_E}", _fixed("month", 0)),
        (rf"{_B}diesen\s+monat{_E}", _fixed("month", 0)),
        (rf"{_B}este\s+mes{_E}", _fixed("month", 0)),
        (rf"{_B}(?:в\s+)?этом\s+месяце{_E}", _fixed("month", 0)),
        (rf"{_B}(?:tento|tomto)\s+měsíci?{_E}", _fixed("month", 0)),
        (r"本月|这个月|這個月|今月|이번\s*달", _fixed("month", 0)),
        (
            rf"{_B}[وف]?[بلك]?{_ar('هذا')}\s+{_AR_THE}{_ar('شهر')}{_E}"
            rf"|{_B}{_AR_THE}{_ar('شهر')}\s+{_AR_NOW}{_E}",
            _fixed("month", 0),
        ),
        (r"เดือนนี้", _fixed("month", 0)),
        (rf"{_B}tháng\s+này{_E}", _fixed("month", 0)),  # runs on every query: á à are Latin-1
        # named months (English needs "in"/"during"/a year: "may" is also a verb)
        (
            rf"{_B}(?:in|during)\s+(?P<month>{_alt(_EN_MONTHS)})(?:\s+(?P<year>\d{{4}}))?{_E}"
            rf"|{_B}(?P<month2>{_alt(_EN_MONTHS)})\s+(?P<year2>\d{{4}}){_E}",
            _month_names(_EN_MONTHS),
        ),
        (
            rf"{_B}(?:im|in|seit)\s+(?P<month>{_alt(_DE_MONTHS)})(?:\s+(?P<year>\d{{4}}))?{_E}",
            _month_names(_DE_MONTHS),
        ),
        (
            rf"{_B}(?:en|durante)\s+(?P<month>{_alt(_ES_MONTHS)})(?:\s+de\s+(?P<year>\d{{4}}))?{_E}",
            _month_names(_ES_MONTHS),
        ),
        (
            rf"{_B}в\s+(?P<month>{_alt(_RU_MONTHS)})(?:\s+(?P<year>\d{{4}}))?{_E}",
            _month_names(_RU_MONTHS),
        ),
        (
            rf"{_B}v\s+(?P<month>{_alt(_CS_MONTHS)})(?:\s+(?P<year>\d{{4}}))?{_E}",
            _month_names(_CS_MONTHS),
        ),
        (
            r"(?:(?P<year>\d{4})\s*年\s*)?(?P<month>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月"
            r"(?!\s*(?:\d|[一二三四五六七八九十])*\s*[日号號])",
            _month_number,
        ),
        (
            r"(?:(?P<year>\d{4})\s*년\s*)?(?P<month>1[0-2]|0?[1-9])\s*월(?!\s*\d+\s*일)",
            _month_number,
        ),
        (  # في مارس, خلال شهر آذار/مارس 2024, في مارس من العام الماضي
            rf"{_B}(?:[وف]?{_ar('في', 'خلال')}\s+(?:{_ar('شهر')}\s+)?|[وف]?ب?{_ar('شهر')}\s+)"
            rf"(?P<month>{_AR_MONTH})(?:\s*/\s*{_AR_MONTH})?"
            rf"(?:{_AR_YEAR}|(?P<last_year>{_AR_LAST_YEAR}))?{_E}",
            _month_of(_AR_MONTHS),
        ),
        (  # مارس 2024; not a day: 5 مارس 2024, 12 أيار/مايو 1705, 1 من آب عام 1963
            rf"{_B}{_NOT_A_DAY}(?<!/)(?<!/\s)(?<!\d\sمن\s)(?P<month>{_AR_MONTH})"
            rf"(?:\s*/\s*{_AR_MONTH})?{_AR_YEAR}{_E}",
            _month_of(_AR_MONTHS),
        ),
        (  # มีนาคม, เดือนมีนา, มีนาคม พ.ศ. 2567, มี.ค. 2567; not 5 มีนาคม (a day)
            rf"{_NOT_A_DAY}(?:(?P<month>{_TH_FULL})|เดือน(?P<month_s>{_TH_FULL}|{_TH_SHORT}))"
            rf"(?:{_TH_YEAR}|\s*(?P<last_year>ปี(?:ที่แล้ว|ก่อน|กลาย)))?"
            rf"|{_NOT_A_DAY}(?P<month_a>{_TH_ABBR}){_TH_YEAR_A}",
            _month_of(_TH_MONTHS, buddhist_era=True),
        ),
        (  # tháng 3, tháng Ba, tháng 3 năm 2024, tháng 3/2024, tháng 3 năm ngoái; not a day:
            # ngày 5 tháng 3
            rf"{_B}{_NOT_A_DAY}tháng\s+(?:{_VI_MONTH})"
            rf"(?:(?:\s*[/,]\s*|\s+(?:năm\s+)?)(?P<year>\d{{4}})"
            rf"|\s+(?P<last_year>năm\s+(?:ngoái|trước|rồi))(?!\s+(?:đó|khi){_E}))?{_E}",
            _month_of(_VI_MONTHS),
        ),
        # years
        (rf"{_B}last\s+year{_E}", _fixed("year", 1)),
        (
            rf"{_B}letztes\s+jahr{_E}|{_B}vergangenes\s+jahr{_E}|{_B}voriges\s+jahr{_E}",
            _fixed("year", 1),
        ),
        (rf"{_B}(?:el\s+)?año\s+pasado{_E}", _fixed("year", 1)),
        (rf"{_B}(?:в\s+)?прошлом\s+году{_E}", _fixed("year", 1)),
        (rf"{_B}loni{_E}|{_B}minulý\s+rok{_E}", _fixed("year", 1)),
        (r"去年|昨年|작년", _fixed("year", 1)),
        (rf"{_B}{_AR_LAST_YEAR}{_E}", _fixed("year", 1)),
        (rf"{_TH_UNCOUNTED}ปี(?:{_TH_LAST}|กลาย)", _fixed("year", 1)),
        (
            rf"{_B}{_VI_UNCOUNTED}năm\s+(?:ngoái|trước|rồi|qua){_E}{_VI_NOT_RELATIVE}",
            _fixed("year", 1),
        ),
        (rf"{_B}this\s+year{_E}", _fixed("year", 0)),
        (rf"{_B}dieses\s+jahr{_E}", _fixed("year", 0)),
        (rf"{_B}este\s+año{_E}", _fixed("year", 0)),
        (rf"{_B}(?:в\s+)?этом\s+году{_E}", _fixed("year", 0)),
        (rf"{_B}letos{_E}", _fixed("year", 0)),
        (r"今年|올해", _fixed("year", 0)),
        (
            rf"{_B}[وف]?[بلك]?(?:{_ar('هذا')}\s+{_AR_THE}{_ar('عام')}|{_ar('هذه')}\s+{_AR_THE}{_ar('سنة')})"
            rf"{_E}|{_B}{_AR_THE}{_ar('سنة')}\s+{_ar('الحالية', 'الجارية')}{_E}",
            _fixed("year", 0),
        ),
        (r"(?<!ทุก)ปีนี้", _fixed("year", 0)),
        (rf"{_B}{_VI_UNCOUNTED}năm\s+nay{_E}", _fixed("year", 0)),  # not "5 năm nay", 5 years now
    ]
]


def resolve(query: str, reference: datetime, tz: ZoneInfo) -> TimeWindow | None:
    """The window named by the first known time expression in ``query``, or None."""
    today = reference.astimezone(tz).date()
    for m, span in matches(query):
        try:
            first, after = span(today, m)
            start = datetime.combine(first, datetime.min.time(), tz).astimezone(UTC)
            end = datetime.combine(after, datetime.min.time(), tz).astimezone(UTC)
        except (ValueError, OverflowError, KeyError):
            continue
        return TimeWindow(m.group().strip(), start, end)
    return None


def _needle_sets(items: sre_parse.SubPattern | list[tuple[object, object]]) -> list[set[str]]:
    """Sets of strings of which every match of the parsed ``items`` holds at least one
    (each set on its own suffices): the runs of literal characters of the parts every
    match must go through, and of the alternatives of a branch when each has one."""
    out: list[set[str]] = []
    run: list[str] = []
    for op, av in items:
        if op is sre.LITERAL:
            run.append(chr(av))  # type: ignore[arg-type]
            continue
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):  # zero width: the run goes on
            continue
        if run:
            out.append({"".join(run)})
            run = []
        if op is sre.SUBPATTERN:
            out.extend(_needle_sets(av[-1]))  # type: ignore[index]
        elif op is sre.BRANCH:
            alternatives = [_best(_needle_sets(alt)) for alt in av[1]]  # type: ignore[index]
            if all(alternatives):
                out.append(set().union(*alternatives))  # type: ignore[arg-type]
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and av[0] >= 1:  # type: ignore[index]
            out.extend(_needle_sets(av[2]))  # type: ignore[index]
    if run:
        out.append({"".join(run)})
    return out


def _best(sets: list[set[str]]) -> set[str] | None:
    """The set whose shortest string is longest (the rarest to find by chance)."""
    return max(sets, key=lambda s: min(map(len, s)), default=None)


def _needles_of(pattern: re.Pattern[str]) -> list[set[str]]:
    return _needle_sets(sre_parse.parse(pattern.pattern, pattern.flags))


def _ascii_needles(sets: list[set[str]]) -> tuple[str, ...] | None:
    """Lower-case strings of which an ASCII text must hold one for a pattern (compiled
    with IGNORECASE) whose ``_needles_of`` are ``sets`` to match it: () when it never
    can, None when no such strings are known (the rule always runs). A string with a
    letter that matches no ASCII letter in any case cannot be in an ASCII text (so a part
    every match needs, all of whose strings are such, rules the pattern out); one with a
    letter that can (the Kelvin sign and a long s match k and s) is not used."""
    usable = []
    for strings in sets:
        if any(_folds_to_ascii(c) for s in strings for c in s if not c.isascii()):
            continue
        ascii = {s.lower() for s in strings if s.isascii()}
        if not ascii:
            return ()
        usable.append(ascii)
    best = _best(usable)
    return None if best is None else tuple(sorted(best))


def _folds_to_ascii(c: str) -> bool:
    one = re.compile(re.escape(c), re.IGNORECASE)
    return any(one.fullmatch(chr(a)) for a in range(128))


# The rules an ASCII query runs (the Latin script's), each with the strings that gate it:
# its search runs only when the lower-cased query holds one (a search starts with a look
# behind and so scans every position: ~85 us per question for the 53 rules, ~17 gated;
# bench/timeexpr.py). Other queries search for a rule's strings with its own flags first.
_NEEDLES = [_needles_of(pattern) for _, pattern, _ in _RULES]  # one parse per rule
_ASCII_RULES: tuple[tuple[re.Pattern[str], Span, tuple[str, ...] | None], ...] = tuple(
    (pattern, span, needles)
    for (script, pattern, span), sets in zip(_RULES, _NEEDLES, strict=True)
    if script == "latin" and (needles := _ascii_needles(sets)) != ()
)


def _gate(pattern: re.Pattern[str], sets: list[set[str]]) -> re.Pattern[str] | None:
    """A search for the strings one of which every match of ``pattern`` holds (its
    ``_needles_of`` are ``sets``), with its
    flags and IGNORECASE (the same case rules or looser), or None when no such strings are
    known: a literal search skips the positions that cannot start one, where
    ``pattern``'s own begins with a look behind and tries every position."""
    found = _best(sets)
    if found is None:
        return None
    alternatives = sorted(found, key=lambda s: (-len(s), s))
    # IGNORECASE always: a string from a (?i:...) part of a case-sensitive pattern is
    # matched in any case there (a gate may let more through, never less)
    return re.compile("|".join(map(re.escape, alternatives)), pattern.flags | re.IGNORECASE)


# Every rule with its gate (the non-ASCII path: ASCII queries use _ASCII_RULES)
_GATED = [
    (script, pattern, span, _gate(pattern, sets))
    for (script, pattern, span), sets in zip(_RULES, _NEEDLES, strict=True)
]


@lru_cache(maxsize=64)
def _rules_for(
    scripts: frozenset[str],
) -> tuple[tuple[re.Pattern[str], Span, re.Pattern[str] | None], ...]:
    """The rules, in order, a query written in ``scripts`` can match, with their gates."""
    return tuple((p, span, gate) for script, p, span, gate in _GATED if script in scripts)


@lru_cache(maxsize=1024)
def matches(query: str) -> tuple[tuple[re.Match[str], Span], ...]:
    """Every rule that matches ``query``, in rule order, with its match: a function of the
    text alone, so a repeated query skips the searches (a third of a cached Recall's
    pipeline time went to them). The matches are on the query in NFC, without Arabic vowel
    marks; only the rules of the scripts the query holds letters of run."""
    if query.isascii():
        lower = query.lower()
        rules = [
            (pattern, span)
            for pattern, span, needles in _ASCII_RULES
            if needles is None or any(n in lower for n in needles)
        ]
        return _search(rules, query)
    # NFC: a Vietnamese "tháng" typed as "tha\u0301ng" (NFD) is the same word
    text = unicodedata.normalize("NFC", query)
    scripts = frozenset(name for name, letters in _SCRIPTS.items() if letters.search(text))
    if "arabic" in scripts:
        text = _AR_MARKS.sub("", text)
    rules = [
        (pattern, span)
        for pattern, span, gate in _rules_for(scripts)
        if gate is None or gate.search(text)
    ]
    return _search(rules, text)


def _search(
    rules: Iterable[tuple[re.Pattern[str], Span]], text: str
) -> tuple[tuple[re.Match[str], Span], ...]:
    found = []
    for pattern, span in rules:
        m = pattern.search(text)
        if m is None:
            continue
        if m.groupdict().get("month2"):  # "March 2023": the alternative spelling's groups
            m = re.match(r"(?P<month>\w+)\s+(?P<year>\d{4})", m.group(), re.IGNORECASE) or m
        found.append((m, span))
    return tuple(found)
