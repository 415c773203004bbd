"""Time expressions in queries resolve to calendar windows in the caller's time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

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
