"""Several daemons over one bucket: compaction and cleanup by one at a time, the holder of
a lease object written with conditional PUTs (storage/lease.py), against a moto server.
The stores here are LanceStores as the daemon builds them, two per bucket."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import lance
import lancedb
import pytest
from memoryd_testing.compaction import hold_large_rewrites, small_fragments
from memoryd_testing.records import record, row
from memoryd_testing.s3 import S3Server

from memoryd.storage import lance_store
from memoryd.storage.lance_store import LanceStore
from memoryd.storage.lease import MaintenanceLease, open_store

pytestmark = pytest.mark.integration

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def credentials(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.set_credentials(monkeypatch)
    # The holder looks at the table every 5 s in a daemon; here at once.
    monkeypatch.setattr(lance_store, "SHARED_MAINTAIN_CHECK_SECONDS", 0.1)


def lease(s3: S3Server, uri: str, ttl: float = 60.0) -> MaintenanceLease:
    return MaintenanceLease(open_store(uri, s3.storage_options()), ttl_seconds=ttl)


def test_of_several_daemons_racing_for_a_free_lease_exactly_one_gets_it(s3: S3Server) -> None:
    uri = f"s3://{s3.new_bucket()}/memoryd"
    leases = [lease(s3, uri) for _ in range(6)]
    won: list[bool] = []
    gate = threading.Barrier(len(leases))

    def race(one: MaintenanceLease) -> None:
        gate.wait()
        won.append(one.try_acquire())

    racers = [threading.Thread(target=race, args=(one,)) for one in leases]
    for r in racers:
        r.start()
    for r in racers:
        r.join()
    assert sorted(won) == [False] * 5 + [True]
    holder = next(one for one in leases if one.held())
    assert holder.holder() == holder.owner
    # The holder renews; the others, seeing it renewed, keep out.
    assert holder.try_acquire()
    assert not any(one.try_acquire() for one in leases if one is not holder)


def test_a_lease_not_renewed_is_taken_over_after_its_ttl_and_a_released_one_at_once(
    s3: S3Server,
) -> None:
    uri = f"s3://{s3.new_bucket()}/memoryd"
    # b's second look must come within ttl of its first: that first look's round trip to
    # moto and the 2.1 s sleep: 1.9 s to spare for a loaded machine (it was 0.9 s).
    a, b = lease(s3, uri, ttl=4.0), lease(s3, uri, ttl=4.0)
    assert a.try_acquire()
    assert not b.try_acquire()  # b starts counting from the etag it saw
    time.sleep(2.1)
    assert not a.held()  # a (crashed, say: no renewal) stops maintaining after ttl/2 ...
    assert not b.try_acquire()  # ... but b waits the whole ttl
    time.sleep(2.0)
    assert b.try_acquire() and b.takeovers == 1
    assert not a.try_acquire()  # a's renewal finds another etag: it lost the lease
    assert b.holder() == b.owner

    b.release()
    assert a.try_acquire()  # released: no waiting


def shared_store(s3: S3Server, uri: str, **kw: object) -> LanceStore:
    return LanceStore(
        uri,
        table="m",
        model_name="x",
        dim=8,
        storage_options=s3.storage_options(),
        lease=lease(s3, uri, ttl=4.0),
        **kw,  # type: ignore[arg-type]
    )


def versions_in(s3: S3Server, uri: str) -> list[int]:
    """The versions of table m whose manifests are in the bucket (Lance names them
    u64::MAX - version)."""
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    listed = s3.client().list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/m.lance/_versions/")
    names = [o["Key"].rsplit("/", 1)[1] for o in listed.get("Contents", [])]
    return [2**64 - 1 - int(n.removesuffix(".manifest")) for n in names if n.endswith(".manifest")]


def manifests(s3: S3Server, uri: str) -> int:
    return len(versions_in(s3, uri))


async def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def holder_and_other(s3: S3Server, uri: str) -> AsyncIterator[tuple[LanceStore, LanceStore]]:
    """Two daemons' stores on one bucket, started: the first holds the maintenance lease
    (and folds the access log past 4 rows), the other does not; both closed at the end."""
    holder = shared_store(s3, uri, access_fold_rows=4)
    holder.start()
    other = shared_store(s3, uri)
    other.start()
    try:
        await wait_for(lambda: holder._lease.held())  # type: ignore[union-attr]
        yield holder, other
    finally:
        holder.close()
        other.close()


async def test_two_daemons_on_one_bucket_compact_one_at_a_time_and_lose_nothing(
    s3: S3Server,
) -> None:
    uri = f"s3://{s3.new_bucket()}/memoryd"
    blocker = lease(s3, uri)  # a third daemon holds the lease while the two write
    assert blocker.try_acquire()
    first = shared_store(s3, uri, compact_every=6, keep_versions_seconds=0.5)
    second = shared_store(s3, uri, compact_every=6, keep_versions_seconds=0.5)
    first.start()
    second.start()
    try:
        for i in range(0, 16, 2):  # both append, one commit each, interleaved
            await asyncio.gather(first.add([row(i)]), second.add([row(i + 1)]))
        assert manifests(s3, uri) == 17  # the empty table's version and 16 appends
        blocker.release()  # one of the two takes the lease over, compacts, cleans up
        await wait_for(lambda: first.compactions + second.compactions > 0)
        # Versions replaced more than keep_versions ago go (the holder cleans up) ...
        await wait_for(lambda: manifests(s3, uri) < 5)
        # ... and only the holder did any of it.
        holders = [s for s in (first, second) if s._lease.held()]  # type: ignore[union-attr]
        assert len(holders) == 1
        idle = second if holders[0] is first else first
        assert idle.compactions == 0 and idle.cleanups == 0
        await asyncio.gather(first.add([row(100)]), second.add([row(101)]))
    finally:
        first.close()
        second.close()
    fresh = LanceStore(uri, table="m", model_name="x", dim=8, storage_options=s3.storage_options())
    ids = sorted(m.id for m, _, _ in fresh.scan())
    assert ids == sorted(record(i).id for i in [*range(16), 100, 101])


async def test_a_cleanup_spares_the_version_another_daemon_just_opened(s3: S3Server) -> None:
    """A version committed long ago and replaced just now stays for keep_versions: the
    other daemon reading it (at start, or following writes) reads it whole. (Lance's plain
    older_than would delete it, and its files with it, at the compaction that replaced it.)"""
    uri = f"s3://{s3.new_bucket()}/memoryd"
    keep = 1.0
    other = lease(s3, uri)  # another daemon holds the lease while the table is written
    assert other.try_acquire()
    store = shared_store(s3, uri, compact_every=3, keep_versions_seconds=keep)
    store.start()
    try:
        for i in range(3):
            await store.add([row(i)])  # 3 small fragments: a compaction is due
        await asyncio.sleep(keep + 0.5)  # the newest version is now older than keep ...
        reader = lancedb.connect(uri, storage_options=s3.storage_options()).open_table("m")
        opened = reader.version  # ... when a daemon opens it; then the lease changes hands
        other.release()
        await wait_for(lambda: store.compactions > 0)  # compacted (replacing it), cleaned up
        # The version it opened is still there (its manifest, so its files too), and reads.
        assert opened in versions_in(s3, uri)
        assert max(versions_in(s3, uri)) > opened
        rows = reader.to_arrow()
        assert sorted(rows.column("id").to_pylist()) == [record(i).id for i in range(3)]
    finally:
        store.close()


def test_the_lease_key_sits_under_the_stores_prefix(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    one = lease(s3, f"s3://{bucket}/team-a")
    assert one.try_acquire()
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["team-a/_memoryd/maintenance.lease"]
    assert lease(s3, f"s3://{bucket}/team-b").try_acquire()  # another store, another lease


def test_daemons_starting_together_on_an_empty_bucket_all_open_the_one_table(
    s3: S3Server,
) -> None:
    uri = f"s3://{s3.new_bucket()}/memoryd"
    opened: list[LanceStore] = []
    failed: list[BaseException] = []
    gate = threading.Barrier(3)

    def open_store_() -> None:
        gate.wait()
        try:
            opened.append(
                LanceStore(
                    uri, table="m", model_name="x", dim=8, storage_options=s3.storage_options()
                )
            )
        except BaseException as e:
            failed.append(e)

    starters = [threading.Thread(target=open_store_) for _ in range(3)]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    assert not failed and len(opened) == 3


async def test_access_counts_of_other_daemons_persist_across_the_holders_fold(
    s3: S3Server,
) -> None:
    """The holder folds the access log (rewrites it as one row per id); an append another
    daemon prepared against the log before the fold still lands, on the folded log."""
    uri = f"s3://{s3.new_bucket()}/memoryd"
    async with holder_and_other(s3, uri) as (holder, other):
        await other.record_access([("m0001", 1, NOW)])
        await holder.record_access([(f"m{i:04d}", 1, NOW) for i in range(2, 7)])
        assert holder.access_folds == 1
        later = NOW.replace(hour=5)
        await other.record_access([("m0001", 7, later)])  # its handle predates the fold
    fresh = LanceStore(uri, table="m", model_name="x", dim=8, storage_options=s3.storage_options())
    access = fresh.read_access()
    assert access["m0001"] == (7, later)
    assert sorted(access) == [f"m{i:04d}" for i in range(1, 7)]


async def test_the_holder_folds_an_access_log_that_only_other_daemons_write(
    s3: S3Server,
) -> None:
    uri = f"s3://{s3.new_bucket()}/memoryd"
    async with holder_and_other(s3, uri) as (holder, other):
        for i in range(6):  # one append each, by the daemon not holding the lease
            await other.record_access([(f"m{i:04d}", i + 1, NOW)])
        await wait_for(lambda: holder.access_folds == 1)
        assert other.access_folds == 0
        await other.record_access([("m0000", 9, NOW)])
    fresh = LanceStore(uri, table="m", model_name="x", dim=8, storage_options=s3.storage_options())
    assert fresh._access is not None and fresh._access.count_rows() <= 7  # folded: 6 ids (+1)
    access = fresh.read_access()
    assert {k: v[0] for k, v in access.items()} == {f"m{i:04d}": i + 1 for i in range(1, 6)} | {
        "m0000": 9
    }


async def test_on_a_bucket_a_large_fragments_purge_holds_the_forgets_off(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an object store the purge's rewrite of a large fragment from before holds this
    daemon's Forgets off, as every rewrite did: run beside them (as on a local disk), a
    Forget landing on it got it refused, and its objects, a copy of the text just
    forgotten, stayed in the bucket in no version for 7 days (helper-51's review)."""
    small_fragments(monkeypatch)
    bucket = s3.new_bucket()
    uri = f"s3://{bucket}/memoryd"
    store = LanceStore(
        uri,
        table="m",
        model_name="x",
        dim=8,
        storage_options=s3.storage_options(),
        lease=lease(s3, uri, ttl=30.0),
        compact_every=10**6,
        keep_versions_seconds=0.2,
    )
    entered, go, _ = hold_large_rewrites(monkeypatch)
    code = "the door code is 9001"
    store._purged_at = time.monotonic()  # no purge before the Forgets
    store.start()
    try:
        await store.add([row(i, text=code if i == 1 else f"text {i}") for i in range(300)])
        await store.delete([row(0)[0].id])
        store.purge_every = 0.0
        assert await asyncio.to_thread(entered.wait, 20), "no rewrite of the fragment began"
        forget = asyncio.ensure_future(store.delete([row(1)[0].id]))
        await asyncio.sleep(0.5)
        assert not forget.done()  # held off until the rewrite has committed
        go.set()
        await asyncio.wait_for(forget, 20)
        assert store.lone_refusals == 0
    finally:
        go.set()
        store.close()
    client = s3.client()
    listing = client.list_objects_v2(Bucket=bucket, Prefix="memoryd/m.lance/data/")
    keys = [o["Key"] for o in listing["Contents"]]
    ds = lance.dataset(f"{uri}/m.lance", storage_options=s3.storage_options())
    listed = {
        f.path
        for v in ds.versions()
        for fr in ds.checkout_version(v["version"]).get_fragments()
        for f in fr.metadata.files
    }
    holding = [
        k for k in keys if code.encode() in client.get_object(Bucket=bucket, Key=k)["Body"].read()
    ]
    assert holding and all(k.rsplit("/", 1)[1] in listed for k in holding)


def holding(s3: S3Server, bucket: str, text: str) -> list[str]:
    """The keys under the store's table whose bytes hold ``text``."""
    client = s3.client()
    listing = client.list_objects_v2(Bucket=bucket, Prefix="memoryd/m.lance/")
    keys = []
    for o in listing.get("Contents", []):
        try:
            body = client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        except client.exceptions.NoSuchKey:
            continue  # deleted since the listing
        if text.encode() in body:
            keys.append(o["Key"])
    return keys


@pytest.mark.parametrize("store_after", [False, True], ids=["nothing-after", "a-store-after"])
async def test_on_a_bucket_a_forgotten_text_leaves_keep_versions_after_the_purge(
    s3: S3Server, store_after: bool
) -> None:
    """The versions a purge replaced list the file that holds a forgotten text; they go
    keep_versions after the purge. Before, the cleanup's time cutoff kept the Forget's own
    version (committed within keep_versions of the purge) until a version committed
    keep_versions after the purge was itself that old: with nothing written after the
    purge, for good; and with another daemon's Store after it (two small fragments, so no
    cleanup alone), until the hourly cleanup."""
    bucket = s3.new_bucket()
    uri = f"s3://{bucket}/memoryd"
    keep = 2.0
    # (shared: each reads the newest version before its writes, as a daemon following does)
    holder = shared_store(s3, uri, compact_every=10**6, keep_versions_seconds=keep, shared=True)
    other = shared_store(s3, uri, compact_every=10**6, keep_versions_seconds=keep, shared=True)
    code = "the door code is 9001"
    holder.start()
    try:
        await wait_for(lambda: holder._lease.held())  # type: ignore[union-attr]
        other.start()
        await holder.add([row(i, text=code if i == 1 else f"text {i}") for i in range(20)])
        assert holding(s3, bucket, code)
        await other.delete([row(1)[0].id])  # the Forget: by either daemon, purged by the holder
        await wait_for(lambda: holder._purge_ended > 0)
        if store_after:
            await other.add([row(100)])
        await wait_for(lambda: not holding(s3, bucket, code), timeout=keep + 20)
    finally:
        holder.close()
        other.close()
    fresh = LanceStore(uri, table="m", model_name="x", dim=8, storage_options=s3.storage_options())
    ids = sorted(m.id for m, _, _ in fresh.scan())
    assert ids == sorted(record(i).id for i in [0, *range(2, 20)] + ([100] if store_after else []))
