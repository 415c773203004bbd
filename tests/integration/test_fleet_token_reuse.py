"""A daemon of a fleet (storage.uri = s3://..., a moto server on loopback) restarted on its
own data dir: its token file (tokens.bin, storage/token_map.py) is reused whole when the
shared table is still at the version its clean shutdown left it, and when another daemon
wrote meanwhile the start reads only that daemon's rows from the table; either way its
Recalls rerank with the right token vectors (no read finds the file holding another
memory's)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from memoryd_client import MemoryClient
from memoryd_testing.launcher import Daemon
from memoryd_testing.s3 import S3Server

pytestmark = pytest.mark.integration

VISIBLE_WITHIN = 15.0  # far above the ~0.5 s following takes on an idle machine

DAMAGED = "does not hold memory"  # token_file's warning for a record that is not the row's


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Daemon]]:
    s3 = S3Server().start()
    root = tmp_path_factory.mktemp("fleet-tokens")
    env = s3.daemon_env(f"s3://{s3.new_bucket()}/memoryd")
    a, b = (Daemon(root / n, root / f"{n}.log", env) for n in "ab")
    try:
        a.start()
        b.start()
        yield a, b
    finally:
        for d in (a, b):
            if d.alive():
                assert d.stop() == 0, d.log_tail()
        s3.stop()


def test_a_restarted_daemon_reads_from_the_table_only_what_others_wrote_while_it_was_down(
    pair: tuple[Daemon, Daemon],
) -> None:
    a, b = pair
    agent = "fleet-token-reuse"
    with MemoryClient(b.address, retries=0, timeout=30) as cb:
        bees = cb.store(agent, "The user keeps bees on the roof.").memory
    with MemoryClient(a.address, retries=0, timeout=30) as ca:
        deadline = time.monotonic() + VISIBLE_WITHIN
        while bees.id not in {m.id for m in ca.list_all(agent)}:
            assert time.monotonic() < deadline, "a never followed b's Store"
            time.sleep(0.05)
    # Both stop cleanly (b writes nothing more): a's table is where its shutdown left it.
    assert a.stop() == 0 and b.stop() == 0
    a.start()
    assert "token file reused" in a.log_text(), a.log_tail()
    with MemoryClient(a.address, retries=0, timeout=30) as ca:
        assert ca.recall(agent, "What does the user keep?").results[0].memory.id == bees.id
    assert a.stop() == 0
    # Another daemon writes while a is down: a's map names an older version, and the start
    # reads that Store's token vectors from the table, the rest from its file.
    b.start()
    with MemoryClient(b.address, retries=0, timeout=30) as cb:
        wasps = cb.store(agent, "The user is afraid of wasps.").memory
    a.start()
    text = a.log_text()
    assert "token file reused (its map of table version" in text, a.log_tail()
    assert "1 rows' records taken, 1 rows read from the table" in text, a.log_tail()
    with MemoryClient(a.address, retries=0, timeout=30) as ca:
        assert ca.recall(agent, "What is the user afraid of?").results[0].memory.id == wasps.id
        assert ca.recall(agent, "What does the user keep?").results[0].memory.id == bees.id
    assert DAMAGED not in a.log_text()
