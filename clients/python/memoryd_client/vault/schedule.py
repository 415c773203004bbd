"""The morning review's schedule: a five-field cron expression in a time zone.

``minute hour day-of-month month day-of-week`` with ``*``, numbers, ranges ``a-b``, lists
``a,b`` and steps ``*/n`` / ``a-b/n``; day-of-week 0-7 (0 and 7 are Sunday). As in cron,
when both day fields are restricted a day matching either one fires. Times are wall-clock
times in the zone: a time skipped by a DST change does not fire that day, a repeated one
fires once (its first occurrence).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class CronError(ValueError):
    pass


_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")


def _field(text: str, index: int) -> frozenset[int]:
    low, high = _RANGES[index]
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
            if base == "*":
                start, stop = low, high
            elif "-" in base:
                a, b = base.split("-", 1)
                start, stop = int(a), int(b)
            else:
                start = stop = int(base)
                if step_text:
                    stop = high
        except ValueError:
            raise CronError(
                f"cron {_NAMES[index]} field {text!r} is not a number, range or list"
            ) from None
        if step < 1 or not low <= start <= stop <= high:
            raise CronError(f"cron {_NAMES[index]} field {text!r} is outside {low}-{high}")
        values.update(range(start, stop + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_any: bool
    weekdays_any: bool
    zone: ZoneInfo

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> Cron:
        parts = expression.split()
        if len(parts) != 5:
            raise CronError(f"cron {expression!r} needs five fields: minute hour day month weekday")
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise CronError(
                f"time zone {timezone!r} is unknown (e.g. Europe/Zurich, UTC)"
            ) from None
        f = [_field(p, i) for i, p in enumerate(parts)]
        return cls(f[0], f[1], f[2], f[3], f[4], parts[2] == "*", parts[4] == "*", zone)

    def _day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.days_any or self.weekdays_any:
            return dom and dow
        return dom or dow

    def next_after(self, after: datetime) -> datetime:
        """The first firing strictly after ``after`` (aware), as an aware UTC datetime."""
        local = after.astimezone(self.zone)
        day = local.date()
        for _ in range(366 * 8):  # Feb 29 on a given weekday can be years away
            if self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        wall = datetime(
                            day.year, day.month, day.day, hour, minute, tzinfo=self.zone
                        )
                        if wall.astimezone(UTC).astimezone(self.zone).replace(
                            tzinfo=None
                        ) != wall.replace(tzinfo=None):
                            continue  # skipped by a DST change
                        if wall.astimezone(UTC) > after.astimezone(UTC):
                            return wall.astimezone(UTC)
            day += timedelta(days=1)
        raise CronError("the cron expression never fires")
