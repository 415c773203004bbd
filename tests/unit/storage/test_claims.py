"""Key claims across daemons (storage/claims.py): of two concurrent claims of one key on
two connections to one store, the second inserts nothing and learns the first's memory."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memoryd.storage import claims as claims_module
from memoryd.storage.claims import KeyClaims


def test_of_two_concurrent_claims_of_one_key_one_wins_and_both_name_it(tmp_path: Path) -> None:
    daemons = [KeyClaims(str(tmp_path), "m") for _ in range(2)]
    for round_ in range(6):
        start = threading.Barrier(2)
        named: dict[int, str] = {}

        def claim(
            i: int,
            key: str = f"retry-{round_}",
            start: threading.Barrier = start,
            named: dict[int, str] = named,
        ) -> None:
            start.wait()
            named[i] = daemons[i].claim("agent", key, f"memory-{key}-{i}")

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert named[0] == named[1], named  # one answer for the key on both
        assert named[0] in {f"memory-retry-{round_}-0", f"memory-retry-{round_}-1"}
    # Another agent's same key is another claim; a claim once won stays won.
    assert daemons[0].claim("other", "retry-0", "mine") == "mine"
    assert daemons[1].claim("agent", "retry-0", "late") != "late"


def test_compaction_keeps_recent_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claims_module, "COMPACT_EVERY", 3)
    claims = KeyClaims(str(tmp_path), "m")
    for i in range(4):  # the third claim compacts (and drops claims older than a day)
        assert claims.claim("agent", f"k{i}", f"m{i}") == f"m{i}"
    assert [claims.claim("agent", f"k{i}", "again") for i in range(4)] == ["m0", "m1", "m2", "m3"]


def test_claims_of_many_keys_at_once_all_win(tmp_path: Path) -> None:
    claims = KeyClaims(str(tmp_path), "m")
    won: list[bool] = []

    def claim(i: int) -> None:
        won.append(claims.claim("agent", f"key-{i}", f"memory-{i}") == f"memory-{i}")

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won == [True] * 8


def test_only_the_maintenance_lease_holder_cleans_up_the_claims_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon without the lease never deletes versions another daemon may be reading."""
    from datetime import timedelta

    import lancedb

    monkeypatch.setattr(claims_module, "COMPACT_EVERY", 3)
    holder = {"now": False}
    claims = KeyClaims(
        str(tmp_path), "m", maintains=lambda: holder["now"], keep_versions=timedelta(seconds=0.001)
    )
    for i in range(6):
        claims.claim("agent", f"k{i}", f"m{i}")
    table = lancedb.connect(str(tmp_path)).open_table("m_claims")
    kept = len(table.list_versions())
    assert kept >= 7  # the create and six claims: nothing cleaned up
    holder["now"] = True
    for i in range(6, 9):
        claims.claim("agent", f"k{i}", f"m{i}")
    table = lancedb.connect(str(tmp_path)).open_table("m_claims")
    assert len(table.list_versions()) < kept
    assert [claims.claim("agent", f"k{i}", "again") for i in range(9)] == [
        f"m{i}" for i in range(9)
    ]


def test_a_claim_older_than_the_lapse_names_nothing(tmp_path: Path) -> None:
    """A claim older than ``lapse`` (store.idempotency_days) or CLAIM_DAYS is replaced by
    the next claim of its key, compacted or not; a fresh one still wins."""
    from datetime import UTC, datetime, timedelta

    import lancedb

    claims = KeyClaims(str(tmp_path), "m", lapse=timedelta(hours=1))
    assert claims.claim("agent", "old", "m-old") == "m-old"
    assert claims.claim("agent", "day", "m-day") == "m-day"
    assert claims.claim("agent", "fresh", "m-fresh") == "m-fresh"
    db = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    table = db.open_table("m_claims")
    now = datetime.now(UTC)
    for key, age in (("old", timedelta(hours=2)), ("fresh", timedelta(minutes=50))):
        table.update(where=f"claim = '{_claim_of('agent', key)}'", values={"at": now - age})
    assert claims.claim("agent", "old", "m-new") == "m-new"
    assert claims.claim("agent", "fresh", "m-late") == "m-fresh"
    assert claims.claim("agent", "old", "m-later") == "m-new"  # the new claim holds
    assert table.count_rows() == 3
    # without a lapse, a claim lasts CLAIM_DAYS
    plain = KeyClaims(str(tmp_path), "m")
    table.update(
        where=f"claim = '{_claim_of('agent', 'day')}'", values={"at": now - timedelta(hours=23)}
    )
    assert plain.claim("agent", "day", "m-x") == "m-day"
    table.update(
        where=f"claim = '{_claim_of('agent', 'day')}'", values={"at": now - timedelta(hours=25)}
    )
    assert plain.claim("agent", "day", "m-y") == "m-y"


def _claim_of(agent_id: str, key: str) -> str:
    import hashlib

    return hashlib.sha256(f"{agent_id}\x00{key}".encode()).hexdigest()


def test_two_daemons_replacing_one_lapsed_claim_at_once_name_one_memory(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    import lancedb

    lapse = timedelta(hours=1)
    daemons = [KeyClaims(str(tmp_path), "m", lapse=lapse) for _ in range(2)]
    for round_ in range(4):
        key = f"k{round_}"
        daemons[0].claim("agent", key, "stale")
        table = lancedb.connect(str(tmp_path)).open_table("m_claims")
        old = datetime.now(UTC) - 2 * lapse
        table.update(where=f"claim = '{_claim_of('agent', key)}'", values={"at": old})
        start = threading.Barrier(2)
        named: dict[int, str] = {}

        def claim(
            i: int,
            key: str = key,
            start: threading.Barrier = start,
            named: dict[int, str] = named,
        ) -> None:
            start.wait()
            named[i] = daemons[i].claim("agent", key, f"m{i}")

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert named[0] == named[1] and named[0] in {"m0", "m1"}, named
