"""Every example of README.md runs as printed and does what a reader expects.

The ``./dev ctl`` lines of "Try it" run through ``./dev`` against a daemon started here
(``MEMORYD_ADDRESS`` points them at it, so the lines stay exactly as printed), and every
``python`` block runs in a fresh interpreter with the README's address replaced by that
daemon's. A python block added to the README runs here too; one this test does not know
must still exit 0.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from memoryd_client import MemoryClient, NotFound
from memoryd_client.routing import rendezvous_order
from memoryd_testing.launcher import Daemon, child_env
from memoryd_testing.s3 import ACCESS_KEY, SECRET_KEY, S3Server

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_ADDRESS = "127.0.0.1:50051"
README_ADDRESS_2 = "127.0.0.1:50052"  # the second daemon of the fleet example
TIMEOUT = 120
MEMORY = "The user prefers dark mode in every editor"

Run = Callable[..., subprocess.CompletedProcess[str]]


def section(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, flags=re.S | re.M)


def env_for(address: str) -> dict[str, str]:
    return child_env({"MEMORYD_ADDRESS": address})


@pytest.fixture(scope="module")
def readme_daemon(make_daemon):  # type: ignore[no-untyped-def]
    """A fresh daemon: agent ``main`` holds nothing before the examples run."""
    return make_daemon().start()


@pytest.fixture(scope="module")
def run(readme_daemon) -> Run:  # type: ignore[no-untyped-def]
    def run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env_for(readme_daemon.address),
        )

    return run


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.args, result.returncode, result.stdout, result.stderr)
    return result.stdout


def test_try_it_runs_as_printed(run: Run) -> None:
    lines = [ln for b in blocks(section("Try it"), "bash") for ln in b.splitlines() if ln.strip()]
    assert lines == [
        f'./dev ctl store main "{MEMORY}"',
        './dev ctl recall main "which theme does the user like?"',
        "./dev ctl list main",
        './dev ctl forget main --query "dark mode"',
        "./dev ctl --json stats main",
    ], "the README's Try it changed: update this test's expectations with it"
    out = [run(["bash", "-c", line]) for line in lines]

    created = ok(out[0])
    assert created.startswith("created: ")
    memory_id = created.split()[1]
    assert str(uuid.UUID(memory_id)) == memory_id
    recalled = ok(out[1])  # the recall finds it
    assert memory_id in recalled and MEMORY in recalled
    assert memory_id in ok(out[2]) and MEMORY in out[2].stdout
    assert ok(out[3]).strip() == f"deleted: {memory_id}"  # the forget deletes it
    stats = json.loads(ok(out[4]))
    assert stats["total"] == 0


def test_python_examples_run_as_printed(  # type: ignore[no-untyped-def]
    run: Run, tmp_path: Path, make_daemon, readme_daemon
) -> None:
    examples = blocks(README.read_text(encoding="utf-8"), "python")
    seen = set()
    for i, code in enumerate(examples):
        if "tls_credentials(" in code:
            check_tls_example(run, code, tmp_path / f"tls-{i}")
            seen.add("tls")
            continue
        assert README_ADDRESS in code, code
        script = tmp_path / f"example_{i}.py"
        second = ""
        if README_ADDRESS_2 in code:
            second = make_daemon().start().address
            code = code.replace(f'"{README_ADDRESS_2}"', f'"{second}"')
        script.write_text(
            "import os\n" + code.replace(f'"{README_ADDRESS}"', 'os.environ["MEMORYD_ADDRESS"]'),
            encoding="utf-8",
        )
        printed = ok(run([sys.executable, str(script)], cwd=tmp_path)).splitlines()
        if second:
            check_fleet_example(printed, [readme_daemon.address, second])
            seen.add("fleet")
        elif "c.store(" in code and "except InvalidArgument" in code:
            check_sync_example(printed)
            seen.add("sync")
        elif "c.stream(" in code:
            # Ops run concurrently: answers come back in either order.
            assert sorted(printed) == ["1 store", "2 recall"], printed
            seen.add("stream")
    assert seen == {"sync", "stream", "tls", "fleet"}, seen


def check_fleet_example(printed: list[str], fleet: list[str]) -> None:
    """print(home, r.memory.id): home is agent main's first daemon by the shared rule, and
    the memory is on that daemon only (the two daemons share no store here)."""
    home, memory_id = printed[0].split()
    assert home == fleet[rendezvous_order(fleet, "main")[0]], (printed, fleet)
    away = next(a for a in fleet if a != home)
    with MemoryClient(home, timeout=30.0) as c:
        assert c.get("main", memory_id).text == "The staging database is db-stage-2"
    with MemoryClient(away, timeout=30.0) as c, pytest.raises(NotFound):
        c.get("main", memory_id)


def check_sync_example(printed: list[str]) -> None:
    # print(pb.StoreOutcome.Name(r.outcome), r.memory.id)  # STORE_OUTCOME_CREATED ...
    outcome, memory_id = printed[0].split()
    assert outcome == "STORE_OUTCOME_CREATED" and str(uuid.UUID(memory_id)) == memory_id
    # for hit in c.recall("main", "when do we deploy?", limit=3): print score and text
    hits = printed[1:-2]
    assert hits and re.fullmatch(r"\d\.\d\d Deploys happen on Fridays at 5pm", hits[0]), printed
    # except NotFound: print(e.code.name, e.details)  # NOT_FOUND memory ... not found
    assert re.fullmatch(r"NOT_FOUND memory \S+ not found", printed[-2]), printed
    # except InvalidArgument: print(e.code.name, e.details)  # INVALID_ARGUMENT text is empty
    assert printed[-1].startswith("INVALID_ARGUMENT text is empty"), printed


def check_tls_example(run: Run, code: str, where: Path) -> None:
    """The TLS snippet names PEM files the reader has; with such files beside it, it
    builds both clients without an error (it connects nowhere until a call)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make the PEM files the example reads")
    where.mkdir()

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=readme-ca")  # fmt: skip
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "gw.key",
            "-out", "gw.csr", "-subj", "/CN=gw")  # fmt: skip
    openssl("x509", "-req", "-in", "gw.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "gw.pem", "-days", "2")  # fmt: skip
    script = where / "tls_example.py"
    script.write_text(code, encoding="utf-8")
    ok(run([sys.executable, str(script)], cwd=where))


def test_every_benchmark_the_readme_names_answers_help() -> None:
    """Each ``./dev bench SCRIPT`` line of "Benchmarks" (and the store-size command of
    Operations) imports and prints its options: a script broken by a refactor of what it
    imports fails here, not on the first reader who tries it."""
    lines = [ln for b in blocks(section("Benchmarks"), "bash") for ln in b.splitlines()]
    scripts = sorted({ln.split()[2] for ln in lines if ln.startswith("./dev bench ")})
    scripts += re.findall(r"`\./dev bench (\S+\.py)`", section("Operations"))
    assert len(scripts) >= 12 and "store_size.py" in scripts, scripts
    for script in scripts:
        result = subprocess.run(
            ["./dev", "bench", script, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=child_env({}),
        )
        assert result.returncode == 0, (script, result.stderr[-2000:])
        assert result.stdout.startswith("usage: "), (script, result.stdout[:200])


def test_several_daemons_over_one_bucket_run_as_printed(tmp_path: Path) -> None:
    """Operations' "Several daemons over one bucket": its exports and its two ``memoryd
    serve`` lines, run against a local moto server (the bucket named as printed; the
    credentials, the endpoint of the local-server line and the data dirs and ports are the
    only things replaced). A Store on one daemon is then got and recalled on the other."""
    code = next(
        b
        for b in re.findall(r"^ *```sh\n(.*?)^ *```$", section("Operations"), flags=re.S | re.M)
        if "MEMORYD_STORAGE__URI" in b
    )
    lines = [shlex.split(ln, comments=True) for ln in code.splitlines()]
    lines = [ln for ln in lines if ln]
    exports = [ln[1:] for ln in lines if ln[0] == "export"]
    serves = [ln for ln in lines if ln[0] != "export"]
    env = dict(pair.split("=", 1) for ln in exports for pair in ln)
    assert set(env) == {
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION",
        "MEMORYD_STORAGE__URI",
        "MEMORYD_STORAGE__STORAGE_OPTIONS",
    }, env
    bucket = re.fullmatch(r"s3://([a-z0-9-]+)/\w+", env["MEMORYD_STORAGE__URI"])
    assert bucket, env["MEMORYD_STORAGE__URI"]
    printed_endpoint = json.loads(env["MEMORYD_STORAGE__STORAGE_OPTIONS"])["aws_endpoint"]
    assert [ln[:3] for ln in serves] == [["memoryd", "serve", "--data-dir"]] * 2, serves
    assert all(ln[4] == "--listen" and len(ln) == 6 for ln in serves), serves

    s3 = S3Server().start()
    daemons: list[Daemon] = []
    try:
        s3.client().create_bucket(Bucket=bucket.group(1))
        env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = ACCESS_KEY, SECRET_KEY
        options = env["MEMORYD_STORAGE__STORAGE_OPTIONS"]
        env["MEMORYD_STORAGE__STORAGE_OPTIONS"] = options.replace(printed_endpoint, s3.endpoint)
        for ln in serves:
            where = tmp_path / Path(ln[3]).name
            daemon = Daemon(where, tmp_path / f"{where.name}.log", env, listen="127.0.0.1:0")
            daemons.append(daemon.start())
        a, b = (MemoryClient(d.address, retries=0, timeout=30.0) for d in daemons)
        with a, b:
            stored = a.store("main", "The staging database is db-stage-2").memory
            deadline = time.monotonic() + 30  # ~0.25-0.5 s on an idle machine
            while True:
                try:
                    assert b.get("main", stored.id).text == stored.text
                    break
                except NotFound:
                    assert time.monotonic() < deadline, "daemon b never saw daemon a's Store"
                    time.sleep(0.05)
            hits = b.recall("main", "which database is staging?").results
            assert hits and hits[0].memory.id == stored.id
        # The table is in the bucket the README names.
        listed = s3.client().list_objects_v2(Bucket=bucket.group(1), Prefix="memoryd/")
        assert listed.get("KeyCount", 0) > 0
    finally:
        codes = [(d.stop(), d.log_tail()) for d in daemons]
        s3.stop()
    assert all(code == 0 for code, _ in codes), codes
