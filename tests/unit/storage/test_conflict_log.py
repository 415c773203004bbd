"""The conflict log (storage/conflict_log.py): every entry in the file, and in memory the
newest of each scope, so that one tenant's flood of conflicts never pushes another
tenant's out of ListConflicts and Review."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memoryd.core.records import Category, Conflict
from memoryd.storage.conflict_log import JsonlConflictLog

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
