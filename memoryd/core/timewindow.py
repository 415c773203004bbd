"""Time expressions in a query ("last week", "letzte Woche", "上周") as a window of time.

``resolve(query, reference, tz)`` finds the first expression it knows and returns the
window it names, [start, end) in UTC, computed on the calendar of the time zone ``tz``
(days start at local midnight, so a window across a DST change is 23 or 25 hours long;
weeks start on Monday). Known, in English, German, Spanish, Russian, Czech, Chinese,
Japanese and Korean:

    today, yesterday, the day before yesterday
    this / last week, this / last month, this / last year
    N days / weeks / months ago     (that day / week / month)
    in <month> [<year>]             (without a year: the latest such month not after the
                                     reference; "in March" asked in February is last March)

Why not dateparser (checked, 1.5.0): it returns a point in time rather than the span an
expression names ("in March" -> March 15, "last week" -> 7 days ago), read "we" in "what
did we decide" as a date, found nothing in "la semana pasada" or "на прошлой неделе", and
took 1-50 ms per query (215 ms for the first): too slow and too loose for every Recall.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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


def _number(text: str) -> int:
    if text.isdigit():
        return int(text)
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

# Longer expressions first: "the day before yesterday" before "yesterday".
_RULES: list[tuple[re.Pattern[str], Span]] = [
    (re.compile(p, re.IGNORECASE), span)
    for p, span in [
        # the day before yesterday
        (rf"{_B}(?:the\s+)?day\s+before\s+yesterday{_E}", _fixed("day", 2)),
        (rf"{_B}vorgestern{_E}", _fixed("day", 2)),
        (rf"{_B}anteayer{_E}|{_B}antes\s+de\s+ayer{_E}", _fixed("day", 2)),
        (rf"{_B}позавчера{_E}", _fixed("day", 2)),
        (rf"{_B}předevčírem{_E}", _fixed("day", 2)),
        (r"前天|一昨日|おととい|그저께|그제", _fixed("day", 2)),
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
        # yesterday, today
        (rf"{_B}yesterday{_E}", _fixed("day", 1)),
        (rf"{_B}gestern{_E}", _fixed("day", 1)),
        (rf"{_B}ayer{_E}", _fixed("day", 1)),
        (rf"{_B}вчера{_E}", _fixed("day", 1)),
        (rf"{_B}včera{_E}", _fixed("day", 1)),
        (r"昨天|昨日|어제", _fixed("day", 1)),
        (rf"{_B}today{_E}", _fixed("day", 0)),
        (rf"{_B}heute{_E}", _fixed("day", 0)),
        (rf"{_B}hoy{_E}", _fixed("day", 0)),
        (rf"{_B}сегодня{_E}", _fixed("day", 0)),
        (rf"{_B}dnes{_E}", _fixed("day", 0)),
        (r"今天|今日|오늘", _fixed("day", 0)),
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
        (rf"{_B}this\s+week{_E}", _fixed("week", 0)),
        (rf"{_B}diese(?:r)?\s+woche{_E}", _fixed("week", 0)),
        (rf"{_B}esta\s+semana{_E}", _fixed("week", 0)),
        (rf"{_B}(?:на\s+)?этой\s+неделе{_E}", _fixed("week", 0)),
        (rf"{_B}(?:tento|tenhle|tomto)\s+(?:týden|týdnu){_E}", _fixed("week", 0)),
        (r"本周|这周|這週|这个星期|這個星期|今週|이번\s*주", _fixed("week", 0)),
        # months
        (rf"{_B}(?:last|past|previous)\s+month{_E}", _fixed("month", 1)),
        (rf"{_B}(?:letzten|vorigen|vergangenen)\s+monat{_E}", _fixed("month", 1)),
        (rf"{_B}(?:el\s+)?mes\s+pasado{_E}", _fixed("month", 1)),
        (rf"{_B}(?:в\s+)?прошлом\s+месяце{_E}", _fixed("month", 1)),
        (rf"{_B}minul(?:ý|ém)\s+měsíci?{_E}", _fixed("month", 1)),
        (r"上个月|上個月|上月|先月|지난\s*달", _fixed("month", 1)),
        (rf"{_B}this\s+month{_E}", _fixed("month", 0)),
        (rf"{_B}diesen\s+monat{_E}", _fixed("month", 0)),
        (rf"{_B}este\s+mes{_E}", _fixed("month", 0)),
        (rf"{_B}(?:в\s+)?этом\s+месяце{_E}", _fixed("month", 0)),
        (rf"{_B}(?:tento|tomto)\s+měsíci?{_E}", _fixed("month", 0)),
        (r"本月|这个月|這個月|今月|이번\s*달", _fixed("month", 0)),
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
        (rf"{_B}this\s+year{_E}", _fixed("year", 0)),
        (rf"{_B}dieses\s+jahr{_E}", _fixed("year", 0)),
        (rf"{_B}este\s+año{_E}", _fixed("year", 0)),
        (rf"{_B}(?:в\s+)?этом\s+году{_E}", _fixed("year", 0)),
        (rf"{_B}letos{_E}", _fixed("year", 0)),
        (r"今年|올해", _fixed("year", 0)),
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


@lru_cache(maxsize=1024)
def matches(query: str) -> tuple[tuple[re.Match[str], Span], ...]:
    """Every rule that matches ``query``, in rule order, with its match: a function of the
    text alone, so a repeated query skips the ~80 searches (a third of a cached Recall's
    pipeline time went to them)."""
    found = []
    for pattern, span in _RULES:
        m = pattern.search(query)
        if m is None:
            continue
        if m.groupdict().get("month2"):  # "March 2023": the alternative spelling's groups
            m = re.match(r"(?P<month>\w+)\s+(?P<year>\d{4})", m.group(), re.IGNORECASE) or m
        found.append((m, span))
    return tuple(found)
