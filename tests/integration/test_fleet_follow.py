"""Several daemons over one bucket (storage.uri = s3://..., a moto server on loopback): each
follows the others' commits into its own index (storage.follow_interval, 0.25 s by default
for an object store). What one acknowledges, the others answer with: Recall, Get, List,
Update, Forget, idempotency keys and duplicate checks, Stats' follow lag.

Visibility is polled with a deadline (VISIBLE_WITHIN, far above the ~0.25-0.5 s it takes
on an idle machine, since two shared cores are no place for timing assertions)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from memoryd_client import MemoryClient, MemorydError, NotFound
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_testing.launcher import Daemon
from memoryd_testing.s3 import S3Server

pytestmark = pytest.mark.integration

VISIBLE_WITHIN = 15.0
INBOX = "team:inbox"
INBOX_READER = "inbox-reader"
T = TypeVar("T")


@pytest.fixture(scope="module")
def daemons(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Daemon]]:
    """Three daemons, each with its own data dir, over one bucket."""
    root = tmp_path_factory.mktemp("fleet")
    env = {
        **s3.daemon_env(f"s3://{s3.new_bucket()}/memoryd"),
        # every agent may write INBOX, only INBOX_READER may read it (a drop box)
        "MEMORYD_POLICY__DEFAULT_WRITE": json.dumps(["agent:{agent_id}", INBOX]),
        "MEMORYD_POLICY__AGENTS": json.dumps({INBOX_READER: {"read": [INBOX]}}),
    }
    fleet = [Daemon(root / n, root / f"{n}.log", env) for n in "abc"]
    try:
        for d in fleet:
            d.start()
        yield fleet
    finally:
        for d in fleet:
            if d.alive():
                assert d.stop() == 0, d.log_tail()


@pytest.fixture(scope="module")
def fleet(daemons: list[Daemon]) -> Iterator[tuple[MemoryClient, ...]]:
    clients = [MemoryClient(d.address, retries=0) for d in daemons]
    try:
        yield tuple(clients)
    finally:
        for c in clients:
            c.close()


def eventually(probe: Callable[[], T | None], what: str) -> T:
    """``probe()``'s first answer that is not None (an error answer counts as None)
    within VISIBLE_WITHIN seconds."""
    deadline = time.monotonic() + VISIBLE_WITHIN
    while True:
        try:
            got = probe()
        except MemorydError:
            got = None
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {VISIBLE_WITHIN}s: {what}")
        time.sleep(0.05)


def listed(c: MemoryClient, agent: str) -> set[str]:
    return {m.id for m in c.list_all(agent)}


def test_a_store_on_one_daemon_is_got_listed_and_recalled_on_the_others(
    fleet: tuple[MemoryClient, ...],
) -> None:
    a, b, c = fleet
    kept = a.store("bees", "The user keeps three hives of bees on the roof").memory
    for other in (b, c):
        got = eventually(lambda o=other: o.get("bees", kept.id), "Get on another daemon")
        assert got.text == kept.text
        assert listed(other, "bees") == {kept.id}
        hits = other.recall("bees", "who keeps bees?").results
        assert [h.memory.id for h in hits][:1] == [kept.id]


def test_update_and_forget_on_one_daemon_reach_the_other_and_stay(
    fleet: tuple[MemoryClient, ...],
) -> None:
    a, b, _ = fleet
    kept = a.store("edits", "The user's favourite tea is green tea").memory
    gone = a.store("edits", "The user parks the bike in the cellar").memory
    eventually(lambda: b.get("edits", gone.id), "the stores on b")
    a.update("edits", kept.id, text="The user's favourite tea is oolong")
    a.forget("edits", id=gone.id)
    eventually(
        lambda: True if b.get("edits", kept.id).text.endswith("oolong") else None,
        "the update on b",
    )
    eventually(lambda: True if gone.id not in listed(b, "edits") else None, "the forget on b")
    # A later write from a reaches b: b has followed past the delete, which stays.
    later = a.store("edits", "The user waters the plants on Sundays").memory
    eventually(lambda: b.get("edits", later.id), "a later store on b")
    assert listed(b, "edits") == {kept.id, later.id}
    assert [h.memory.id for h in b.recall("edits", "bike cellar").results].count(gone.id) == 0
    with pytest.raises(NotFound):
        b.get("edits", gone.id)


def test_concurrent_stores_on_two_daemons_lose_nothing(fleet: tuple[MemoryClient, ...]) -> None:
    a, b, c = fleet
    made: list[str] = []
    lock = threading.Lock()

    def write(client: MemoryClient, name: str) -> None:
        for i in range(8):
            text = f"Note {i} from the writer {name}: item {i * 37 + len(name)} is in box {name}{i}"
            memory = client.store("union", text).memory
            with lock:
                made.append(memory.id)

    writers = [threading.Thread(target=write, args=(x, n)) for x, n in ((a, "west"), (b, "east"))]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert len(set(made)) == 16
    for client in (a, b, c):
        eventually(
            lambda x=client: True if listed(x, "union") == set(made) else None,
            "every daemon lists both writers' memories",
        )


def test_an_idempotency_key_retried_on_another_daemon_stores_once(
    fleet: tuple[MemoryClient, ...],
) -> None:
    a, b, _ = fleet
    text = "The user's passport expires in March 2031"
    first = a.store("keys", text, idempotency_key="trip-42")
    # Right away, no waiting for the follow interval: b catches up before deciding.
    again = b.store("keys", text, idempotency_key="trip-42")
    assert again.memory.id == first.memory.id
    assert (first.outcome, again.outcome) == (pb.STORE_OUTCOME_CREATED, pb.STORE_OUTCOME_CREATED)
    # The same text without a key, right away on b: an exact duplicate of a's memory.
    twin = b.store("keys", text)
    assert (twin.outcome, twin.memory.id) == (pb.STORE_OUTCOME_DUPLICATE, first.memory.id)
    # A key whose Store on b answered DUPLICATE replays on a (the key table follows too).
    dup = b.store("keys", text, idempotency_key="trip-43")
    replay = a.store("keys", text, idempotency_key="trip-43")
    assert dup.outcome == replay.outcome == pb.STORE_OUTCOME_DUPLICATE
    assert dup.memory.id == replay.memory.id == first.memory.id
    for client in (a, b):
        assert eventually(
            lambda x=client: True if listed(x, "keys") == {first.memory.id} else None,
            "one memory on every daemon",
        )


def test_a_near_duplicate_on_another_daemon_after_the_first_is_acknowledged_is_one_memory(
    fleet: tuple[MemoryClient, ...],
) -> None:
    a, b, _ = fleet
    first = a.store("near", "The user is allergic to peanuts").memory
    # Acknowledged on a: b's Store catches up first, so the near-duplicate check sees it.
    again = b.store("near", "the user is allergic to peanuts!")
    assert again.outcome == pb.STORE_OUTCOME_DUPLICATE
    assert again.memory.id == again.duplicate_of == first.id
    assert 0.95 <= again.duplicate_score < 1.0  # a near duplicate, not the same text


def test_stats_shows_how_far_each_daemon_trails(
    fleet: tuple[MemoryClient, ...], daemons: list[Daemon]
) -> None:
    a, b, _ = fleet
    b_address = daemons[1].address
    a.store("lag", "The user's bike is red")
    seen = a.stats("lag").follow_latest_version

    def caught_up() -> pb.StatsResponse | None:
        s = b.stats("lag")
        return s if s.follow_applied_version >= seen else None

    stats = eventually(caught_up, "b applied the version a wrote")
    assert 0 <= stats.follow_seconds_since_check < VISIBLE_WITHIN
    assert stats.follow_applied_version <= stats.follow_latest_version
    printed = subprocess.run(
        [sys.executable, "-m", "memoryd", "ctl", "--address", b_address, "stats", "lag"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert re.search(r"follow: table version \d+ applied of \d+ seen \(\d+ behind\)", printed)


def test_the_same_key_on_two_daemons_at_the_same_instant_is_one_memory(
    fleet: tuple[MemoryClient, ...],
) -> None:
    a, b, c = fleet
    texts = [  # unlike each other: none is a near-duplicate of another
        "The user's locker at the gym is number 1042",
        "The user's daughter starts school in September",
        "The user prefers window seats on long flights",
        "The user's landlord is called Mrs Okafor",
        "The user is learning to play the cello",
        "The user's car needs new winter tyres",
    ]
    for i, text in enumerate(texts):
        start = threading.Barrier(2)
        named: dict[str, str] = {}

        def send(
            name: str,
            client: MemoryClient,
            key: str = f"race-{i}",
            t: str = text,
            start: threading.Barrier = start,
            named: dict[str, str] = named,
        ) -> None:
            start.wait()
            named[name] = client.store("race", t, idempotency_key=key).memory.id

        senders = [threading.Thread(target=send, args=(n, x)) for n, x in (("a", a), ("b", b))]
        for s in senders:
            s.start()
        for s in senders:
            s.join()
        assert named["a"] == named["b"], f"round {i}: two memories for one key"
    for client in (a, b, c):
        eventually(
            lambda x=client: True if len(listed(x, "race")) == len(texts) else None,
            f"one memory per key on every daemon: {[len(listed(x, 'race')) for x in fleet]}",
        )


def test_the_same_key_into_a_write_only_scope_on_two_daemons_is_one_memory(
    fleet: tuple[MemoryClient, ...],
) -> None:
    """A client that retries a Store into a scope it may only write on another daemon at
    the same instant: one memory, and both answers name it (the loser's copy goes)."""
    a, b, c = fleet
    writer = "inbox-writer"
    texts = [
        "Ticket: the printer on floor 3 jams on duplex jobs",
        "Ticket: the VPN drops every evening around 18:00",
        "Ticket: the wiki search cannot find pages by their title",
        "Ticket: the badge reader at the side door is offline",
        "Ticket: the shared calendar shows meetings twice",
        "Ticket: the build agents run out of disk on Fridays",
    ]
    for i, text in enumerate(texts):
        start = threading.Barrier(2)
        named: dict[str, str] = {}

        def send(
            name: str,
            client: MemoryClient,
            key: str = f"inbox-{i}",
            t: str = text,
            start: threading.Barrier = start,
            named: dict[str, str] = named,
        ) -> None:
            start.wait()
            got = client.store(writer, t, scope=INBOX, idempotency_key=key)
            assert got.outcome == pb.STORE_OUTCOME_CREATED and got.memory.text == t
            named[name] = got.memory.id

        senders = [threading.Thread(target=send, args=(n, x)) for n, x in (("a", a), ("b", b))]
        for s in senders:
            s.start()
        for s in senders:
            s.join()
        assert named.keys() == {"a", "b"}, "a Store failed"
        assert named["a"] == named["b"], f"round {i}: two memories for one key"

    def in_inbox(x: MemoryClient) -> list[str]:
        return sorted(m.text for m in x.list_all(INBOX_READER) if m.agent_id == writer)

    for client in (a, b, c):
        eventually(
            lambda x=client: True if in_inbox(x) == sorted(texts) else None,
            f"one memory per key on every daemon: {[in_inbox(x) for x in fleet]}",
        )


def test_a_lapsed_key_reused_on_another_daemon_takes_the_other_text(
    s3: S3Server, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """store.idempotency_days on a fleet: a key answered DUPLICATE is free after the window
    on every daemon, whatever its claim in <table>_claims said (it named the duplicate's
    memory: the Store deleted the memory it had made and answered DUPLICATE of that)."""
    window = 3.0  # seconds
    root = tmp_path_factory.mktemp("lapse")
    env = {
        **s3.daemon_env(f"s3://{s3.new_bucket()}/memoryd"),
        "MEMORYD_STORE__IDEMPOTENCY_DAYS": str(window / 86400),
    }
    pair = [Daemon(root / n, root / f"{n}.log", env) for n in "ab"]
    try:
        for d in pair:
            d.start()
        with (
            MemoryClient(pair[0].address, retries=0) as a,
            MemoryClient(pair[1].address, retries=0) as b,
        ):
            text = "The staging cluster runs in eu-west-1."
            other = "Lunch on Fridays is at noon in the canteen."
            first = a.store("lapse", text)
            dup = a.store("lapse", text, idempotency_key="k")
            assert (dup.outcome, dup.memory.id) == (pb.STORE_OUTCOME_DUPLICATE, first.memory.id)
            time.sleep(window + 1.0)
            taken = b.store("lapse", other, idempotency_key="k")
            assert (taken.outcome, taken.memory.text) == (pb.STORE_OUTCOME_CREATED, other)
            replay = a.store("lapse", other, idempotency_key="k")
            assert replay.memory.id == taken.memory.id
            assert eventually(
                lambda: True if listed(a, "lapse") == {first.memory.id, taken.memory.id} else None,
                "both memories on a",
            )
    finally:
        for d in pair:
            if d.alive():
                assert d.stop() == 0, d.log_tail()
