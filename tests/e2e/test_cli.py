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

    again = ok(ctl("store", agent, f"  {text}\n"))
    assert again.startswith(f"duplicate: {memory_id} (an existing memory, score 1.00: {text})")
    got = ok(ctl("get", agent, memory_id))
    as_json = json.loads(ok(ctl("get", agent, memory_id, as_json=True)))
    assert as_json["importance"] == 0.9  # the float32 as typed, not 0.8999999761581421
    assert as_json["category"] == "CATEGORY_PREFERENCE"
    assert memory_id in got and f"[agent:{agent}]" in got and text in got
    recalled = ok(ctl("recall", agent, "tabs or spaces?"))
    assert memory_id in recalled and "score=" in recalled and text in recalled
    listed = ok(ctl("list", agent))
    assert memory_id in listed and text in listed
    stats = ok(ctl("stats", agent))
    assert f"memories visible to {agent}: 1" in stats
    assert f"agent:{agent}: 1" in stats
    assert "store: 1 row, index " in stats and f"(the scopes {agent} reads)" in stats
    assert "follow: off (this daemon is its store's only writer)" in stats  # a local dir
    assert "(the whole daemon)" in ok(ctl("stats", agent, "--daemon-wide"))
    doctor = ok(ctl("doctor", agent))
    assert f"ok   store: 1 memory visible to {agent}, index " in doctor
    assert "ok   recall: answered (1 result)" in doctor

    kept = ctl("forget", agent, "--query", "The user's shoe size")
    assert kept.returncode == 5 and "nothing deleted" in kept.stdout  # exit 5: nothing matched
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
    assert len(page["memories"]) == 1 and page["total_size"] == 2
    assert page["memories"][0]["id"] == second["memory"]["id"]  # newest first
    rest = json.loads(ok(ctl("list", agent, "--page-token", page["next_page_token"], as_json=True)))
    assert [m["id"] for m in rest["memories"]] == [mid]

    stats = json.loads(ok(ctl("stats", agent, as_json=True)))
    assert stats["total"] == 2 and stats["expired_pending"] == 0  # numbers, zeros printed too
    assert stats["embedding_model"] and stats["embedding_dim"] > 0

    forgot = json.loads(ok(ctl("forget", agent, "--id", mid, as_json=True)))
    assert forgot["deleted_ids"] == [mid]
    assert json.loads(ok(ctl("stats", agent, as_json=True)))["total"] == 1


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["get", "AGENT", "not-a-uuid"], ["INVALID_ARGUMENT", "not-a-uuid"]),
        (["store", "AGENT", "   "], ["INVALID_ARGUMENT", "text"]),
        (["store", "AGENT", "x", "--scope", "agent:other"], ["PERMISSION_DENIED", "agent:other"]),
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


def test_serve_on_a_port_in_use_says_so_in_one_line(memoryd_cli, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = memoryd_cli(
            "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")
        )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"memoryd: listen: cannot bind 127.0.0.1:{port}: the port is in use (another memoryd?) "
        "or the address is not one of this machine's; pick another with --listen HOST:PORT "
        "(port 0 = any free port)"
    ]
    assert "serving on" not in result.stdout


def test_serve_with_a_file_as_data_dir_says_so_in_one_line(memoryd_cli, tmp_path):
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("", encoding="utf-8")
    result = memoryd_cli("serve", "--listen", "127.0.0.1:0", "--data-dir", str(not_a_dir))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"memoryd: data_dir {not_a_dir} is a file, not a directory: point --data-dir at a "
        "directory (a missing one is created)"
    ]


def test_reembed_refuses_the_data_dir_of_a_running_daemon(memoryd_cli, running, tmp_path):
    target = tmp_path / "copy"
    result = memoryd_cli("reembed", "--from", str(running.data_dir), "--to", str(target))
    assert result.returncode == 2, result.stderr
    assert f"a memoryd is serving {running.data_dir} (pid " in result.stderr
    assert "stop it first" in result.stderr and "Traceback" not in result.stderr
    assert not target.exists()


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


def test_serve_reads_old_section_names_and_still_refuses_unknown_keys(memoryd_cli, tmp_path):
    config = tmp_path / "old.toml"
    config.write_text('[retrieval]\nrrf_k = 30\n[storage]\ntabel = "typo"\n', encoding="utf-8")
    result = memoryd_cli(
        "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
        "--config", str(config),
    )  # fmt: skip
    assert result.returncode == 2
    warnings = [line for line in result.stderr.splitlines() if "is now" in line]
    assert len(warnings) == 1 and "retrieval.rrf_k is now recall.rrf_k" in warnings[0]
    assert "setting storage.tabel: Extra inputs are not permitted" in result.stderr
    assert "Traceback" not in result.stderr and "serving on" not in result.stdout


def test_old_setting_names_are_warned_of_in_the_daemons_log_format(make_daemon, tmp_path):
    config = tmp_path / "old.toml"
    config.write_text('[retrieval]\nfusion = "rrf"\n', encoding="utf-8")
    daemon = make_daemon(env={"MEMORYD_LOG_FORMAT": "json"}, args=["--config", str(config)]).start()
    try:
        entries = [json.loads(line) for line in daemon.log_text().splitlines() if line]
    finally:
        assert daemon.stop() == 0
    (warning,) = [e for e in entries if "is now" in e["msg"]]
    assert warning["level"] == "WARNING"
    assert warning["msg"].endswith(
        "retrieval.fusion is now recall.fusion; the old name still works, but rename it"
    )


def test_ctl_against_no_daemon_says_how_to_start_one(memoryd_cli, tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = memoryd_cli("ctl", "--address", f"127.0.0.1:{port}", "stats", "nobody")
    assert result.returncode == 3
    assert f"no memoryd answers at 127.0.0.1:{port} (Connection refused); " in result.stderr
    assert "memoryd serve" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


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
    assert json.loads(ok(ctl("stats", agent, as_json=True)))["total"] == 3
    # Without a terminal to ask on, deleting needs --yes; nothing is deleted meanwhile.
    unasked = ctl("delete-bulk", agent, "--category", "preference")
    assert unasked.returncode == 2 and "--yes" in unasked.stderr
    assert json.loads(ok(ctl("stats", agent, as_json=True)))["total"] == 3
    done = ok(
        ctl("delete-bulk", agent, "--category", "preference", "--category", "decision", "--yes")
    )
    assert done.startswith("deleted 2 memories")
    left = json.loads(ok(ctl("list", agent, as_json=True)))["memories"]
    assert [m["id"] for m in left] == [ids[1]]
    none_old = ctl("delete-bulk", agent, "--older-than-days", "30", "--dry-run")
    assert none_old.returncode == 5 and none_old.stdout.startswith("would delete 0 memories")


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
    assert access["req-42"].startswith("rpc=Stats code=OK principal=local agent=logs")
    assert access["req-43"].startswith("rpc=Store code=INVALID_ARGUMENT")
    assert all({"ts", "level", "logger", "request_id", "msg"} <= set(e) for e in entries)
    # DEBUG is memoryd's: no library chatter, and the shutdown says how long it took.
    assert not [e for e in entries if e["logger"] in ("asyncio", "grpc")]
    assert any(e["msg"].startswith("stopped in ") for e in entries)


def test_ctl_search_and_delete_are_recall_and_forget(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    memory_id = ok(ctl("store", agent, "The on-call phone is in the blue drawer")).split()[-1]
    assert memory_id in ok(ctl("search", agent, "where is the on-call phone?"))
    assert ok(ctl("delete", agent, "--id", memory_id)).strip() == f"deleted: {memory_id}"
    assert "(no memories)" in ok(ctl("search", agent, "where is the on-call phone?"))


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["recall", "AGENT", "x", "--limit", "-1"], ["--limit", "1 or more"]),
        (["list", "AGENT", "--page-size", "-5"], ["--page-size", "1 or more"]),
        (["store", "AGENT", "x", "--importance", "3"], ["--importance", "between 0 and 1"]),
        (["store", "AGENT", "x", "--metadata", "novalue"], ["--metadata", "KEY=VALUE"]),
        (["forget", "AGENT", "--query", ""], ["--query", "words"]),
        (["import", "AGENT", "/nonexistent/memories.jsonl"], ["/nonexistent/memories.jsonl"]),
    ],
)
def test_ctl_bad_command_lines_say_what_to_fix_without_a_traceback(ctl, args, mentions):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    result = ctl(*[agent if a == "AGENT" else a for a in args])
    assert result.returncode in (2, 4), result  # 2: the command line, 4: a file
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()  # one line, as the README says
    for fragment in mentions:
        assert fragment in line, (fragment, line)
    if result.returncode == 2 and args[0] != "forget":
        assert line.endswith(f"(see `memoryd ctl {args[0]} --help`)"), line


def test_ctl_import_takes_text_only_rows_names_bad_lines_and_rescopes(ctl, tmp_path):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"text": "The user prefers jasmine tea."}\n\n'
        '{"text": "Deploys are frozen in December.", "category": "CATEGORY_DECISION"}\n'
    )
    out = json.loads(ok(ctl("import", agent, str(rows), as_json=True)))
    assert (out["imported"], out["skipped_existing"], out["errors"]) == (2, 0, [])
    listed = {m["text"]: m for m in json.loads(ok(ctl("list", agent, as_json=True)))["memories"]}
    assert listed["The user prefers jasmine tea."]["category"] == "CATEGORY_PREFERENCE"
    assert listed["The user prefers jasmine tea."]["importance"] == pytest.approx(0.7)
    again = json.loads(ok(ctl("import", agent, str(rows), as_json=True)))
    assert (again["imported"], again["skipped_existing"]) == (0, 2)  # a re-run skips them

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "Fine row."}\n{"text": oops}\n{"text": "Never sent."}\n')
    result = ctl("import", agent, str(bad))
    assert result.returncode == 2 and f"{bad} line 2: not JSON" in result.stderr
    assert "Traceback" not in result.stderr

    other = f"cli-{uuid.uuid4().hex[:12]}"
    exported = tmp_path / "export.jsonl"
    exported.write_text(ok(ctl("export", agent)))
    refused = ctl("import", other, str(exported))  # agent's scope is not other's to write
    assert refused.returncode == 1 and "PERMISSION_DENIED" in refused.stdout
    assert f"--into-scope agent:{other} takes them into this agent's own" in refused.stdout
    ok(ctl("import", other, str(exported), "--into-scope", f"agent:{other}"))
    moved = json.loads(ok(ctl("list", other, as_json=True)))["memories"]
    assert {m["scope"] for m in moved} == {f"agent:{other}"} and len(moved) == 3


def test_ctl_store_takes_metadata_and_ttl(ctl):
    agent = f"cli-{uuid.uuid4().hex[:12]}"
    stored = json.loads(
        ok(ctl("store", agent, "Parking is on level 3 today.", "--metadata", "source=chat",
               "--metadata", "k=v=w", "--ttl", "session", as_json=True))
    )["memory"]  # fmt: skip
    assert stored["metadata"] == {"k": "v=w", "source": "chat"}
    assert stored["expires_at"] is not None


def test_version_and_help_name_defaults_and_environment(memoryd_cli):
    version = memoryd_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("memoryd 0.")
    serve = memoryd_cli("serve", "--help").stdout
    assert "default" in serve and "memoryd" in serve.split("--data-dir", 1)[1]
    ctl_help = memoryd_cli("ctl", "--help").stdout
    assert "MEMORYD_ADDRESS" in ctl_help and "MEMORYD_AUTH_TOKEN" in ctl_help
    assert "(default: 127.0.0.1:50051)" in " ".join(ctl_help.split())
    recall = " ".join(memoryd_cli("ctl", "recall", "--help").stdout.split())
    assert "--limit LIMIT at most this many (default: 5)" in recall
    for command in (["reembed"], ["ctl", "reembed"], ["restore"]):  # says what it does
        text = " ".join(memoryd_cli(*command, "--help").stdout.split())
        assert "[embedder], [recall]" in text and "retrieval" not in text, command
        said = "re-embedding every text" if command == ["restore"] else "another model"
        assert said in text, (command, text)


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


def test_every_ctl_verb_and_option_has_help_and_no_empty_default():
    """`memoryd ctl VERB --help` explains every argument; '(default: None)' is noise."""
    import argparse

    from memoryd.cli import build_parser

    top = build_parser()
    ctl = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices["ctl"]
    verbs = next(a for a in ctl._actions if isinstance(a, argparse._SubParsersAction))
    assert set(verbs.choices) >= {"store", "recall", "forget", "list", "import", "stats"}
    for name, parser in verbs.choices.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"ctl {name}: {action.option_strings or action.dest} has no help"
        text = parser.format_help()
        assert "(default: None)" not in text and "(default: False)" not in text, text
