"""The store on S3-compatible object storage (storage.uri = s3://bucket/prefix), against a
local moto server: the test server enforces conditional PUT (else no multi-writer test
could mean anything), and a daemon keeps its memories in the bucket, not in its data dir."""

from __future__ import annotations

import threading
from pathlib import Path

import botocore.exceptions
import pytest
from memoryd_client import MemoryClient
from memoryd_testing.launcher import Daemon
from memoryd_testing.s3 import S3Server

pytestmark = pytest.mark.integration


def test_the_test_server_refuses_the_second_of_two_conditional_puts(s3: S3Server) -> None:
    bucket = s3.new_bucket()
    client = s3.client()
    outcomes: list[str] = []

    def put(i: int) -> None:
        try:
            client.put_object(Bucket=bucket, Key="commit", Body=str(i).encode(), IfNoneMatch="*")
            outcomes.append("ok")
        except botocore.exceptions.ClientError as e:
            outcomes.append(e.response["Error"]["Code"])

    writers = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert sorted(outcomes) == ["PreconditionFailed"] * 7 + ["ok"], outcomes


def test_a_daemon_keeps_its_memories_in_the_bucket(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    env = s3.daemon_env(f"s3://{bucket}/memoryd")
    first = Daemon(tmp_path / "a", tmp_path / "a.log", env).start()
    try:
        with MemoryClient(first.address, retries=0) as c:
            kept = c.store("main", "The user keeps bees on the roof").memory
    finally:
        assert first.stop() == 0, first.log_tail()
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert any(k.startswith("memoryd/memories.lance/") for k in keys), keys
    assert not (tmp_path / "a" / "lancedb").exists()  # the data dir holds only its own files

    # Another daemon, another (empty) data dir, the same bucket: the memory is there.
    second = Daemon(tmp_path / "b", tmp_path / "b.log", env).start()
    try:
        with MemoryClient(second.address, retries=0) as c:
            got = c.recall("main", "who keeps bees?")
            assert [r.memory.id for r in got.results][:1] == [kept.id]
    finally:
        assert second.stop() == 0, second.log_tail()
