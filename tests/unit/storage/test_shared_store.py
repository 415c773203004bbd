"""A store several daemons share: which versions a cleanup may delete, which failures mean
the object store is unreachable, and the bounded timeouts an object store gets."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import lance
import pytest

from memoryd.storage.lance_store import (
    OBJECT_STORE_DEFAULTS,
    object_store_options,
    replaced_versions,
    safe_older_than,
    store_unreachable,
    unreachable_cause,
    version_stamps,
)
from memoryd.storage.lease import open_store

NOW = 1_800_000_000.0
KEEP = timedelta(seconds=10)


def versions(*ages: float) -> list[dict[str, Any]]:
    """Versions 1..n committed ``ages`` seconds before NOW (lancedb's list_versions shape:
    naive local datetimes)."""
    return [
        {"version": i + 1, "timestamp": datetime.fromtimestamp(NOW - age)}
        for i, age in enumerate(ages)
    ]


def stamps(listed: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """``listed`` as (version, commit time) pairs, as ``version_stamps`` gives them."""
    return [(v["version"], v["timestamp"].timestamp()) for v in listed]


def kept(
    listed: list[dict[str, Any]], older_than: timedelta | None, after: float = 0.0
) -> list[int]:
    """The versions Lance's cleanup keeps with ``older_than`` (the newest always), run
    ``after`` seconds later (the compaction optimize runs first)."""
    if older_than is None:
        return [v["version"] for v in listed]
    cutoff = NOW + after - older_than.total_seconds()
    newest = max(v["version"] for v in listed)
    return [
        v["version"]
        for v in listed
        if v["timestamp"].timestamp() >= cutoff or v["version"] == newest
    ]


def test_the_version_newest_keep_seconds_ago_stays_however_old_its_commit() -> None:
    # Version 2 was committed an hour ago and was the newest until 3 s ago: a daemon may
    # have opened it a moment before version 3 replaced it. Lance's plain older_than=10 s
    # would delete it at once; only version 1 (replaced an hour ago) may go.
    listed = versions(7200, 3600, 3)
    assert kept(listed, KEEP) == [3]  # what the plain rule would do
    assert kept(listed, safe_older_than(stamps(listed), KEEP, NOW)) == [2, 3]


def test_versions_replaced_longer_ago_than_keep_go() -> None:
    listed = versions(100, 60, 30, 22, 5, 1)
    # 10 s ago version 4 was the newest: it stays, with every later one, also when the
    # cleanup starts after a compaction that took 9 s. Versions 1 and 2, replaced 60 and
    # 30 s ago, go; version 3 (replaced 22 s ago) stays for the compaction's margin.
    older_than = safe_older_than(stamps(listed), KEEP, NOW)
    assert kept(listed, older_than) == [3, 4, 5, 6]
    assert kept(listed, older_than, after=9.0) == [4, 5, 6]


def test_nothing_is_due_while_every_version_is_young_or_only_one_is_old() -> None:
    assert safe_older_than(stamps(versions(5, 3, 1)), KEEP, NOW) is None
    assert safe_older_than(stamps(versions(50, 3, 1)), KEEP, NOW) is None  # v1 was newest 10 s ago
    assert safe_older_than(stamps(versions(50)), KEEP, NOW) is None


def test_a_later_version_stamped_earlier_by_a_skewed_clock_stays_too() -> None:
    # Version 3 was committed by a daemon whose clock runs 40 s behind: stamped before
    # version 2. It still stays (every version from the one newest 10 s ago on does).
    listed = versions(100, 20, 60, 2)
    assert kept(listed, safe_older_than(stamps(listed), KEEP, NOW)) == [2, 3, 4]


def test_the_versions_a_purge_replaced_go_keep_after_it_though_nothing_follows() -> None:
    # Version 2 is the Forget (20 s ago), version 3 the purge that rewrote its row's file
    # (19 s ago), nothing after. Both 1 and 2 list the old file, with the text: they go
    # now, keep after the purge. The time cutoff kept version 2 until a version committed
    # keep after the purge was itself keep old: with nothing written, for good.
    listed = versions(3600, 20, 19)
    assert replaced_versions(stamps(listed), KEEP, NOW) == [1, 2]
    assert kept(listed, safe_older_than(stamps(listed), KEEP, NOW)) == [2, 3]
    # 5 s after the purge a daemon may still be reading version 2: only 1 goes.
    assert replaced_versions(stamps(versions(3600, 30, 5)), KEEP, NOW) == [1]


def test_exactly_the_versions_replaced_more_than_keep_ago_go() -> None:
    listed = versions(100, 60, 30, 22, 5, 1)
    assert replaced_versions(stamps(listed), KEEP, NOW) == [
        1,
        2,
        3,
    ]  # version 4 was newest 10 s ago
    assert replaced_versions(stamps(versions(5, 3, 1)), KEEP, NOW) == []
    assert replaced_versions(stamps(versions(50)), KEEP, NOW) == []  # the newest always stays
    assert replaced_versions(stamps(versions(50, 3, 1)), KEEP, NOW) == []  # 1 replaced 3 s ago


def test_a_version_stamped_early_by_a_clock_behind_does_not_age_the_ones_before_it() -> None:
    # Version 3 was committed after version 2 (5 s ago) by a daemon whose clock runs behind:
    # stamped 60 s ago. Versions 1 and 2 were replaced 5 s ago at most: both stay. (The
    # time cutoff took version 3 for old and let version 1 go.)
    listed = versions(100, 5, 60, 2)
    assert replaced_versions(stamps(listed), KEEP, NOW) == []
    assert kept(listed, safe_older_than(stamps(listed), KEEP, NOW)) == [2, 3, 4]


def test_versions_are_dated_right_in_the_hour_a_clock_change_repeats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 2026-11-01 06:30 UTC is 01:30 EST in New York, the second 01:30 that night. pylance's
    # versions() gives a naive 01:30, which reads as 01:30 EDT: an hour early, so a version
    # replaced a second ago would look replaced an hour ago (helper-55's review).
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        committed = datetime(2026, 11, 1, 6, 30, tzinfo=UTC).timestamp()
        ds = FakeDataset([(1, committed - 7200), (2, committed)])
        naive = [(v["version"], v["timestamp"].timestamp()) for v in ds.versions()]
        assert naive == [(1, committed - 7200), (2, committed - 3600)]  # pylance's, off
        assert replaced_versions(naive, KEEP, committed + 1) == [1]  # replaced 1 s ago
        assert version_stamps(ds) == ds.raw
        assert replaced_versions(version_stamps(ds), KEEP, committed + 1) == []
    finally:
        monkeypatch.undo()
        time.tzset()


class RawVersions:
    def __init__(self, raw: list[tuple[int, float]]) -> None:
        self.raw = raw

    def versions(self) -> list[dict[str, Any]]:  # the manifests' nanoseconds
        return [{"version": n, "timestamp": int(t) * 10**9} for n, t in self.raw]


class FakeDataset:
    """A pylance dataset as far as its versions go: its native list (nanoseconds) and
    ``versions()``, pylance 13's own conversion of it."""

    def __init__(self, raw: list[tuple[int, float]]) -> None:
        self.raw = raw
        self._ds = RawVersions(raw)

    def versions(self) -> list[dict[str, Any]]:
        return lance.LanceDataset.versions(self)  # type: ignore[arg-type]


# What lancedb 0.40 raised when the S3 server stopped answering during Table.add.
LANCE_UNREACHABLE = (
    "lance error: LanceError(IO): single PUT of p/t.lance/data/0001.lance failed after "
    "1.04s (204 bytes, LANCE_INITIAL_UPLOAD_SIZE=5242880 bytes, LANCE_UPLOAD_CONCURRENCY=10): "
    "Generic S3 error: Error performing PUT http://127.0.0.1:54055/b/p/t.lance/data/0001.lance "
    "in 116ms, after 1 retries, max_retries: 1, retry_timeout: 3s  - HTTP error: error "
    "sending request, /root/.cargo/registry/src/lance-io-13.0.0/src/object_writer.rs:627:9"
)


def test_an_object_store_that_does_not_answer_is_recognised_with_its_cause() -> None:
    assert store_unreachable(RuntimeError(LANCE_UNREACHABLE))
    assert unreachable_cause(RuntimeError(LANCE_UNREACHABLE)) == "connection failed"
    timeout = "Generic S3 error: Error performing GET ... operation timed out"
    assert unreachable_cause(RuntimeError(timeout)) == "the request timed out"


# The shape of what a daemon logged when the proxy in front of its S3 server was cut, with
# the elapsed time that once made it read as access denied (a bare 403).
CUT_AFTER_403_MS = (
    "LanceError(IO): Generic S3 error: Error performing list request: Error performing GET "
    "http://127.0.0.1:42337/b?list-type=2&prefix=p%2Fmemories.lance%2F_versions%2F in "
    "403.866175ms, after 3 retries, max_retries: 3, retry_timeout: 10s  - HTTP error: error "
    "sending request"
)
SERVER_SAID = (
    "LanceError(IO): Generic S3 error: Error performing PUT http://127.0.0.1:42337/b/p in "
    "12ms, after 0 retries, max_retries: 3, retry_timeout: 10s  - Server returned non-2xx "
    "status code: {status}: <Error><Code>{code}</Code></Error>"
)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (CUT_AFTER_403_MS, "connection failed"),
        (CUT_AFTER_403_MS.replace("403.866175ms", "503.1ms"), "connection failed"),
        (LANCE_UNREACHABLE.replace("(204 bytes", "(403 bytes"), "connection failed"),
        (SERVER_SAID.format(status="403 Forbidden", code="AccessDenied"), "access denied"),
        (SERVER_SAID.format(status="403 Forbidden", code="x"), "access denied"),
        (SERVER_SAID.format(status="400 Bad Request", code="InvalidAccessKeyId"), "access denied"),
        (
            SERVER_SAID.format(status="503 Service Unavailable", code="SlowDown"),
            "the store answered with a server error",
        ),
        # A status is the store's answer even when a host or bucket name says "connect".
        (
            SERVER_SAID.format(status="503 Service Unavailable", code="SlowDown").replace(
                "127.0.0.1:42337", "minio-connect:9000"
            ),
            "the store answered with a server error",
        ),
        (
            SERVER_SAID.format(status="401 Unauthorized", code="ExpiredToken"),
            "access denied",
        ),
        (
            "LanceError(IO): Generic S3 error: Client error with status 403 Forbidden: "
            "<Error><Code>SignatureDoesNotMatch</Code></Error>",
            "access denied",
        ),
        (
            "LanceError(IO): Generic S3 error: HTTP status server error (502 Bad Gateway) "
            "for url (http://127.0.0.1:42337/b/p)",
            "the store answered with a server error",
        ),
        (
            "LanceError(IO): Generic S3 error: Error performing PUT http://127.0.0.1:42337/b/p "
            "in 1.2s - Server returned error response: <Error><Code>InternalError</Code>",
            "the store answered with a server error",
        ),
        (
            "LanceError(IO): Generic S3 error: Error performing GET http://127.0.0.1:1/b "
            "in 5ms - HTTP error: tcp connect error: Connection refused (os error 111)",
            "connection failed",
        ),
    ],
)
def test_the_cause_of_an_unreachable_store_comes_from_its_status_not_any_number(
    text: str, cause: str
) -> None:
    assert store_unreachable(RuntimeError(text))
    assert unreachable_cause(RuntimeError(text)) == cause


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("lance error: Too many concurrent writers: commit conflict"),
        ValueError("cannot convert"),
        KeyError("id"),
    ],
)
def test_conflicts_and_bugs_are_not_an_unreachable_store(error: BaseException) -> None:
    assert not store_unreachable(error)


def test_an_object_store_gets_bounded_timeouts_unless_the_user_set_them() -> None:
    mine = {"aws_endpoint": "http://x", "timeout": "5s"}
    options = object_store_options("s3://bucket/prefix", mine)
    assert options["timeout"] == "5s"  # the user's own
    assert options["client_max_retries"] == OBJECT_STORE_DEFAULTS["client_max_retries"]
    assert options["aws_endpoint"] == "http://x"
    assert object_store_options("/var/lib/memoryd/lancedb", {}) == {}  # a local directory


def test_the_lease_store_takes_lancedbs_storage_options_and_skips_what_it_does_not_know() -> None:
    options = object_store_options(
        "s3://bucket/prefix",
        {"aws_endpoint": "http://127.0.0.1:9", "allow_http": "true", "lance_only_key": "1"},
    )
    store = open_store("s3://bucket/prefix", options)  # no request is made here
    assert "bucket" in repr(store) and "prefix" in repr(store)
