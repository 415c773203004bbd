"""The conflict log (storage/conflict_log.py): every entry in the file, and in memory the
newest of each scope, so that one tenant's flood of conflicts never pushes another
tenant's out of ListConflicts and Review."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memoryd.core.records import Category, Conflict
from memoryd.storage.conflict_log import JsonlConflictLog, _encode

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def entry(n: int, scope: str, existing_scope: str = "global") -> Conflict:
    return Conflict(
        at=T0 + timedelta(seconds=n),
        new_id=f"new-{scope}-{n}",
        existing_id=f"old-{n}",
        new_agent_id="a",
        existing_agent_id="b",
        new_text=f"we decided option {n}",
        existing_text="we decided the other option",
        score=0.8,
        category=Category.DECISION,
        merge_decision="linked",
        scope=scope,
        existing_scope=existing_scope,
    )


def test_a_scope_that_logs_many_conflicts_pushes_out_only_its_own(tmp_path: Path) -> None:
    log = JsonlConflictLog(tmp_path / "conflicts.jsonl", keep_in_memory=10, per_scope=100)
    log.append(entry(0, "agent:honest"))
    log.append(entry(1, "agent:honest"))
    for n in range(2, 52):
        log.append(entry(n, "agent:flood"))
    honest = log.recent(100, frozenset({"agent:honest", "global"}))
    assert [c.new_id for c in honest] == ["new-agent:honest-1", "new-agent:honest-0"]
    flood = log.recent(100, frozenset({"agent:flood", "global"}))
    assert [c.new_id for c in flood] == [f"new-agent:flood-{n}" for n in range(51, 43, -1)]
    # every entry stays in the file, with its texts
    lines = (tmp_path / "conflicts.jsonl").read_text().splitlines()
    assert len(lines) == 52 and json.loads(lines[0])["new_text"] == "we decided option 0"
    # and a restart keeps the same in memory
    again = JsonlConflictLog(tmp_path / "conflicts.jsonl", keep_in_memory=10, per_scope=100)
    assert again.recent(100, frozenset({"agent:honest", "global"})) == honest


def test_each_scope_keeps_its_newest_per_scope(tmp_path: Path) -> None:
    log = JsonlConflictLog(tmp_path / "conflicts.jsonl", per_scope=3)
    for n in range(6):
        log.append(entry(n, "workspace:team"))
    assert [c.at.second for c in log.recent(10)] == [5, 4, 3]


def test_recent_is_newest_first_across_the_scopes_asked_and_both_must_be_among_them(
    tmp_path: Path,
) -> None:
    log = JsonlConflictLog(tmp_path / "conflicts.jsonl")
    log.append(entry(0, "agent:a"))
    log.append(entry(1, "workspace:team", existing_scope="workspace:team"))
    log.append(entry(2, "agent:a", existing_scope="workspace:secret"))
    log.append(entry(3, "agent:a"))
    got = log.recent(10, frozenset({"agent:a", "global", "workspace:team"}))
    assert [c.at.second for c in got] == [3, 1, 0]
    assert [c.at.second for c in log.recent(2, frozenset({"agent:a", "global"}))] == [3, 0]
    assert all(c.new_text == c.existing_text == "" for c in got)  # no texts held


def test_many_scopes_cost_no_walk_over_every_scope_per_entry(tmp_path: Path) -> None:
    """Past ``keep_in_memory`` each entry held found the fullest scope by a walk over every
    scope (and, once the fullest held one entry, rebuilt the table of scopes): with many
    scopes that is quadratic, and the log is read back at start-up. A file of 130,000
    entries of as many agents' scopes took over six minutes to load; this one (60,000
    scopes, 10,000 kept) about 30 s. Each entry now costs the same however many scopes."""
    path = tmp_path / "conflicts.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for n in range(60_000):
            c = entry(n, f"agent:a{n}", existing_scope=f"agent:a{n}")
            f.write(json.dumps(_encode(c)) + "\n")
    started = time.perf_counter()
    log = JsonlConflictLog(path, keep_in_memory=10_000)
    assert time.perf_counter() - started < 10
    assert log.recent(3) == [
        dataclasses.replace(entry(n, f"agent:a{n}", f"agent:a{n}"), new_text="", existing_text="")
        for n in (59_999, 59_998, 59_997)
    ]
    assert log.recent(5, frozenset({"agent:a0", "agent:a49999"})) == []  # evicted
    assert len(log.recent(20_000)) == 10_000


def test_the_fullest_scope_loses_its_oldest_and_ties_come_newest_first(tmp_path: Path) -> None:
    log = JsonlConflictLog(tmp_path / "conflicts.jsonl", keep_in_memory=6, per_scope=100)
    for n in range(4):
        log.append(entry(n, "agent:big"))
    log.append(entry(4, "agent:small"))
    log.append(entry(5, "agent:small"))
    log.append(entry(6, "agent:small"))  # 7 held: agent:big, the fullest (4), loses 0
    log.append(entry(7, "agent:small"))  # 7 held: now agent:small (4) is, and loses 4
    assert sorted(c.at.second for c in log.recent(10)) == [1, 2, 3, 5, 6, 7]
    same = [dataclasses.replace(entry(9, "agent:tie"), new_id=f"tie-{i}") for i in range(3)]
    for c in same:  # one Store logs several conflicts at one time
        log.append(c)
    assert [c.new_id for c in log.recent(2, frozenset({"agent:tie", "global"}))] == [
        "tie-2",
        "tie-1",
    ]


def test_the_file_rotates_so_that_it_never_grows_past_twice_max_bytes(tmp_path: Path) -> None:
    path = tmp_path / "conflicts.jsonl"
    log = JsonlConflictLog(path, max_bytes=2000)
    for n in range(40):
        log.append(entry(n, "agent:a"))
    older = tmp_path / "conflicts.jsonl.1"
    assert path.stat().st_size <= 2000 and older.stat().st_size <= 2000
    on_disk = [
        json.loads(line)["new_id"]
        for file in (older, path)
        for line in file.read_text().splitlines()
    ]
    # the newest entries, in order, end at the last one; the oldest are gone
    assert on_disk == [f"new-agent:a-{n}" for n in range(40 - len(on_disk), 40)]
    assert 0 < len(on_disk) < 40
    # a restart reads both files back
    again = JsonlConflictLog(path, max_bytes=2000)
    assert [c.new_id for c in again.recent(100)] == on_disk[::-1]
    # and appends where the file left off
    again.append(entry(40, "agent:a"))
    assert json.loads(path.read_text().splitlines()[-1])["new_id"] == "new-agent:a-40"


def test_a_line_torn_by_a_crash_costs_no_entry_appended_after_it(tmp_path: Path) -> None:
    """A crash mid-append leaves the file without its last newline: the next daemon's first
    entry must start a line of its own, not be glued to the torn one (both unreadable)."""
    path = tmp_path / "conflicts.jsonl"
    JsonlConflictLog(path).append(entry(0, "agent:a"))
    whole = path.read_bytes()
    path.write_bytes(whole + whole[: len(whole) // 2])  # the torn half of a second line
    log = JsonlConflictLog(path)
    log.append(entry(1, "agent:a"))
    assert [c.new_id for c in JsonlConflictLog(path).recent(10)] == [
        "new-agent:a-1",
        "new-agent:a-0",
    ]


def test_a_log_file_removed_under_the_daemon_is_begun_again(tmp_path: Path) -> None:
    """An operator who deletes conflicts.jsonl (to free its space) while the daemon runs:
    the next entries begin a new file, even when the rotation was due."""
    path = tmp_path / "conflicts.jsonl"
    log = JsonlConflictLog(path, max_bytes=2000)
    line = len(json.dumps(_encode(entry(0, "agent:a")), ensure_ascii=False)) + 1
    for _ in range(2000 // line):  # the next entry would rotate the file
        log.append(entry(0, "agent:a"))
    path.unlink()
    log.append(entry(1, "agent:a"))
    assert [json.loads(line)["new_id"] for line in path.read_text().splitlines()] == [
        "new-agent:a-1"
    ]
    assert log.recent(1)[0].new_id == "new-agent:a-1"
