"""The morning review's cron schedule, in its time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memoryd_client.vault.schedule import Cron, CronError


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def test_nine_in_zurich_is_eight_utc_in_winter_and_seven_in_summer() -> None:
    cron = Cron.parse("0 9 * * *", "Europe/Zurich")
    assert cron.next_after(utc(2026, 1, 10, 12, 0)) == utc(2026, 1, 11, 8, 0)
    assert cron.next_after(utc(2026, 7, 10, 6, 0)) == utc(2026, 7, 10, 7, 0)
    assert cron.next_after(utc(2026, 7, 10, 7, 0)) == utc(2026, 7, 11, 7, 0)  # strictly after


def test_weekdays_ranges_steps_and_lists() -> None:
    cron = Cron.parse("*/30 7-8 * * 1-5", "UTC")
    # Saturday 2026-01-10 -> Monday 2026-01-12 07:00
    assert cron.next_after(utc(2026, 1, 10, 9, 0)) == utc(2026, 1, 12, 7, 0)
    assert cron.next_after(utc(2026, 1, 12, 7, 0)) == utc(2026, 1, 12, 7, 30)
    assert cron.next_after(utc(2026, 1, 12, 8, 30)) == utc(2026, 1, 13, 7, 0)
    sunday = Cron.parse("15 6 * * 7", "UTC")
    assert sunday.next_after(utc(2026, 1, 12, 0, 0)) == utc(2026, 1, 18, 6, 15)
    first_or_monday = Cron.parse("0 0 1 * 1", "UTC")  # either day field matches
    assert first_or_monday.next_after(utc(2026, 1, 27, 0, 0)) == utc(2026, 2, 1, 0, 0)


def test_a_time_skipped_by_dst_does_not_fire_that_day() -> None:
    cron = Cron.parse("30 2 * * *", "Europe/Zurich")  # 2026-03-29 02:30 does not exist there
    assert cron.next_after(utc(2026, 3, 28, 2, 0)) == utc(2026, 3, 30, 0, 30)


@pytest.mark.parametrize(
    ("expr", "tz", "fragment"),
    [
        ("0 9 * *", "UTC", "five fields"),
        ("60 9 * * *", "UTC", "outside 0-59"),
        ("0 9 * * mon", "UTC", "not a number"),
        ("0 9 * * *", "Mars/Olympus", "time zone"),
    ],
)
def test_bad_expressions_are_refused_with_a_reason(expr: str, tz: str, fragment: str) -> None:
    with pytest.raises(CronError, match=fragment):
        Cron.parse(expr, tz)
