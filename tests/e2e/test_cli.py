"""The command line: ``memoryd ctl`` against a running daemon, and ``memoryd serve``
refusing to start on a locked data dir or with invalid settings."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def running(make_daemon):
    return make_daemon().start()


@pytest.fixture(scope="module")
def ctl(memoryd_cli, running):
    """``ctl(*args, as_json=False)``: ``memoryd ctl --address <running daemon> ...``."""

    def run(*args: str, as_json: bool = False) -> subprocess.CompletedProcess[str]:
        flags = ["--json"] if as_json else []
        return memoryd_cli("ctl", "--address", running.address, *flags, *args)

    return run


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


def test_ctl_human_output_round_trip(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    text = "The user prefers tabs over spaces."
    out = ok(ctl("store", agent, text, "--category", "preference", "--importance", "0.9"))
    assert out.startswith("created: ")
    memory_id = out.split()[-1]
    assert str(uuid.UUID(memory_id)) == memory_id

    assert ok(ctl("store", agent, f"  {text}\n")).strip() == f"duplicate: {memory_id}"
    got = ok(ctl("get", agent, memory_id))
    as_json = json.loads(ok(ctl("get", agent, memory_id, as_json=True)))
    assert as_json["importance"] == pytest.approx(0.9)
    assert as_json["category"] == "CATEGORY_PREFERENCE"
    assert memory_id in got and f"[agent:{agent}]" in got and text in got
    recalled = ok(ctl("recall", agent, "tabs or spaces?"))
    assert memory_id in recalled and "score=" in recalled and text in recalled
    listed = ok(ctl("list", agent))
    assert memory_id in listed and text in listed
    stats = ok(ctl("stats", agent))
    assert f"memories visible to {agent}: 1" in stats
    assert f"agent:{agent}: 1" in stats

    kept = ok(ctl("forget", agent, "--query", "The user's shoe size"))
    assert "nothing deleted" in kept
    assert ok(ctl("forget", agent, "--id", memory_id)).strip() == f"deleted: {memory_id}"
    assert "(no memories)" in ok(ctl("list", agent))
    assert "(no memories)" in ok(ctl("recall", agent, "tabs"))
    gone = ctl("get", agent, memory_id)
    assert gone.returncode == 1
    assert "NOT_FOUND" in gone.stderr and memory_id in gone.stderr


def test_ctl_json_output_round_trip(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    stored = json.loads(ok(ctl("store", agent, "Bob's birthday is in March.", as_json=True)))
    assert stored["outcome"] == "STORE_OUTCOME_CREATED"
    memory = stored["memory"]
    assert memory["agent_id"] == agent and memory["text"] == "Bob's birthday is in March."
    mid = memory["id"]
    second = json.loads(
        ok(ctl("store", agent, "The staging cluster lives in eu-west-1.", as_json=True))
    )

    assert json.loads(ok(ctl("get", agent, mid, as_json=True)))["id"] == mid
    recalled = json.loads(ok(ctl("recall", agent, "When is Bob's birthday?", as_json=True)))
    assert recalled["results"][0]["memory"]["id"] == mid
    assert 0 < recalled["results"][0]["score"] <= 1

    page = json.loads(ok(ctl("list", agent, "--page-size", "1", as_json=True)))
    assert len(page["memories"]) == 1 and int(page["total_size"]) == 2
    assert page["memories"][0]["id"] == second["memory"]["id"]  # newest first
    rest = json.loads(ok(ctl("list", agent, "--page-token", page["next_page_token"], as_json=True)))
    assert [m["id"] for m in rest["memories"]] == [mid]

    stats = json.loads(ok(ctl("stats", agent, as_json=True)))
    assert int(stats["total"]) == 2
    assert stats["embedding_model"] and stats["embedding_dim"] > 0

    forgot = json.loads(ok(ctl("forget", agent, "--id", mid, as_json=True)))
    assert forgot["deleted_ids"] == [mid]
    assert int(json.loads(ok(ctl("stats", agent, as_json=True)))["total"]) == 1


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["get", "AGENT", "not-a-uuid"], ["INVALID_ARGUMENT", "not-a-uuid"]),
        (["store", "AGENT", "   "], ["INVALID_ARGUMENT", "text"]),
        (["store", "AGENT", "x", "--importance", "3"], ["INVALID_ARGUMENT", "importance"]),
        (["recall", "AGENT", "x", "--limit", "101"], ["INVALID_ARGUMENT", "100"]),
    ],
)
def test_ctl_reports_errors_on_stderr_with_exit_1(ctl, args, mentions):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    result = ctl(*[agent if a == "AGENT" else a for a in args])
    assert result.returncode == 1
    assert result.stdout == ""
    for fragment in mentions:
        assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert f"memories visible to {agent}: 0" in ok(ctl("stats", agent))


def test_serve_refuses_a_data_dir_locked_by_a_running_daemon(memoryd_cli, ctl, running):
    result = memoryd_cli("serve", "--listen", "127.0.0.1:0", "--data-dir", str(running.data_dir))
    assert result.returncode != 0
    assert str(running.data_dir) in result.stderr
    assert "in use" in result.stderr
    assert "serving on" not in result.stdout
    # The daemon holding the lock is unharmed.
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    assert ok(ctl("store", agent, "Still here.")).startswith("created: ")


def test_serve_refuses_invalid_settings_naming_the_field(memoryd_cli, tmp_path):
    result = memoryd_cli(
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        str(tmp_path / "data"),
        env={"MEMORYD_STORE__MAX_CHARS": "0"},
    )
    assert result.returncode != 0
    assert "store.max_chars" in result.stderr
    assert "Traceback" not in result.stderr
    assert "serving on" not in result.stdout


def test_ctl_against_no_daemon_fails_cleanly(memoryd_cli):
    result = memoryd_cli("ctl", "--address", "127.0.0.1:1", "--timeout", "2", "stats", "nobody")
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr
    assert "Traceback" not in result.stderr


def test_ctl_list_filters_order_and_delete_bulk_dry_run(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    texts = [
        ("I prefer oat milk in coffee", "preference"),
        ("The release train leaves every second Tuesday", "fact"),
        ("We decided to freeze the API on Friday", "decision"),
    ]
    ids = [ok(ctl("store", agent, t, "--category", c)).split()[-1] for t, c in texts]
    newest = json.loads(ok(ctl("list", agent, as_json=True)))["memories"]
    oldest = json.loads(ok(ctl("list", agent, "--oldest-first", as_json=True)))["memories"]
    assert [m["id"] for m in oldest] == ids and [m["id"] for m in newest] == ids[::-1]
    facts = json.loads(ok(ctl("list", agent, "--category", "fact", as_json=True)))["memories"]
    assert [m["id"] for m in facts] == [ids[1]]

    dry = json.loads(
        ok(ctl("delete-bulk", agent, "--category", "preference", "--dry-run", as_json=True))
    )
    assert dry == {"dry_run": True, "matched": [ids[0]], "deleted": []}
    assert json.loads(ok(ctl("stats", agent, as_json=True)))["total"] == "3"
    done = ok(ctl("delete-bulk", agent, "--category", "preference", "--category", "decision"))
    assert done.startswith("deleted 2 memories")
    left = json.loads(ok(ctl("list", agent, as_json=True)))["memories"]
    assert [m["id"] for m in left] == [ids[1]]
    none_old = ok(ctl("delete-bulk", agent, "--older-than-days", "30", "--dry-run"))
    assert none_old.startswith("would delete 0 memories")


def test_ctl_doctor_reports_a_healthy_daemon(ctl, memoryd_cli):
    report = json.loads(ok(ctl("doctor", as_json=True)))
    assert report["ok"] is True
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["health"]["detail"] == "SERVING"
    assert "all-MiniLM-L6-v2-int8-dynq8 (384-d)" in checks["model"]["detail"]
    down = memoryd_cli("ctl", "--address", "127.0.0.1:9", "--timeout", "2", "doctor")
    assert down.returncode == 1 and "FAIL health" in down.stdout


def test_json_logs_carry_request_ids(make_daemon):
    daemon = make_daemon({"MEMORYD_LOG_FORMAT": "json", "MEMORYD_LOG_LEVEL": "DEBUG"}).start()
    import grpc
    from memoryd_client import pb
    from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc

    with grpc.insecure_channel(daemon.address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        stub.Stats(pb.StatsRequest(agent_id="logs"), metadata=(("x-request-id", "req-42"),))
        with pytest.raises(grpc.RpcError):
            stub.Store(
                pb.StoreRequest(agent_id="logs", text=""), metadata=(("x-request-id", "req-43"),)
            )
    assert daemon.stop() == 0
    entries = [
        json.loads(line)
        for line in daemon.log_path.read_text().splitlines()
        if line.startswith("{")
    ]
    access = {e["request_id"]: e["msg"] for e in entries if e["logger"] == "memoryd.access"}
    assert access["req-42"].startswith("Stats OK")
    assert access["req-43"].startswith("Store INVALID_ARGUMENT")
    assert all({"ts", "level", "logger", "request_id", "msg"} <= set(e) for e in entries)


def test_ctl_search_and_delete_are_recall_and_forget(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    memory_id = ok(ctl("store", agent, "The on-call phone is in the blue drawer")).split()[-1]
    assert memory_id in ok(ctl("search", agent, "where is the on-call phone?"))
    assert ok(ctl("delete", agent, "--id", memory_id)).strip() == f"deleted: {memory_id}"
    assert "(no memories)" in ok(ctl("search", agent, "where is the on-call phone?"))


def test_ctl_recall_filters_by_time_and_explains_language_and_time(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    mid = ok(ctl("store", agent, "Die Katze des Nutzers heißt Miso")).split()[-1]
    assert f"{mid}  [agent:{agent}]  (de)" in ok(ctl("get", agent, mid))
    # stored now: a window that ends in 2020 holds nothing
    assert "(no memories)" in ok(ctl("recall", agent, "Katze", "--before", "2020-01-01"))
    assert mid in ok(ctl("recall", agent, "Katze", "--after", "2020-01-01"))
    out = ok(
        ctl(
            "recall", agent, "Wie heißt die Katze? Ich habe es heute gesagt", "--explain",
            "--timezone", "Asia/Tokyo", "--reference-time", "2026-06-30T20:00:00+00:00",
        )
    )  # fmt: skip
    assert "query language: de" in out
    assert "time: 'heute' -> [2026-06-30T15:00:00+00:00, 2026-07-01T15:00:00+00:00)" in out
    bad = ctl("recall", agent, "Katze", "--timezone", "Mars/Base")
    assert bad.returncode == 1 and "INVALID_ARGUMENT" in bad.stderr and "Mars/Base" in bad.stderr
