"""`memoryd vault doctor` says what is wrong: no vault, a file instead of a folder, a review
root reached through a symlink, no daemon; and the vault is off unless asked for."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from memoryd_client.vault.cli import main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def nobody() -> str:
    return f"127.0.0.1:{free_port()}"  # nothing listens there


def test_doctor_names_each_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nobody: str
) -> None:
    code, out = run(
        capsys, "--vault", str(tmp_path / "missing"), "--agent", "a", "--address", nobody, "doctor"
    )
    assert code == 1
    assert "FAIL vault" in out and "FAIL daemon" in out and "UNAVAILABLE" in out
    assert not (tmp_path / "missing").exists()
    a_file = tmp_path / "file.md"
    a_file.write_text("not a folder")
    code, out = run(capsys, "--vault", str(a_file), "--agent", "a", "--address", nobody, "doctor")
    assert code == 1 and "not a directory" in out
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "v").mkdir()
    os.symlink(outside, tmp_path / "v" / "review")
    code, out = run(
        capsys,
        "--vault",
        str(tmp_path / "v"),
        "--agent",
        "a",
        "--review-root",
        "review",
        "--address",
        nobody,
        "doctor",
    )
    assert code == 1 and "is a symlink" in out
    assert list(outside.iterdir()) == []


def test_the_vault_is_off_unless_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.startswith("MEMORYD_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("MEMORYD_VAULT__PATH", str(tmp_path))
    monkeypatch.setenv("MEMORYD_VAULT__AGENT", "a")
    code, out = run(capsys, "build")
    assert code == 2 and "the vault is off" in out
    assert list(tmp_path.iterdir()) == []
    code, out = run(capsys, "--vault", str(tmp_path), "--review-root", "../up", "build")
    assert code == 4 and "'..'" in out


def test_no_daemon_is_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nobody: str
) -> None:
    code, out = run(
        capsys, "--vault", str(tmp_path), "--agent", "a", "--address", nobody, "review", "prepare"
    )
    assert code == 3 and "no daemon answers" in out


def test_doctor_checks_the_morning_reviews_cron_and_time_zone(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    nobody: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORYD_VAULT__MORNING_REVIEW__ENABLED", "true")
    monkeypatch.setenv("MEMORYD_VAULT__MORNING_REVIEW__CRON", "0 25 * * *")
    argv = ("--vault", str(tmp_path), "--agent", "a", "--address", nobody, "doctor")
    code, out = run(capsys, *argv)
    assert code == 1 and "FAIL [vault.morning_review] cannot run" in out and "hour" in out
    monkeypatch.setenv("MEMORYD_VAULT__MORNING_REVIEW__CRON", "30 7 * * 1-5")
    monkeypatch.setenv("MEMORYD_VAULT__MORNING_REVIEW__TIMEZONE", "Europe/Nowhere")
    code, out = run(capsys, *argv)
    assert "FAIL [vault.morning_review] cannot run" in out and "Europe/Nowhere" in out
    monkeypatch.setenv("MEMORYD_VAULT__MORNING_REVIEW__TIMEZONE", "Europe/Zurich")
    code, out = run(capsys, *argv)
    assert "ok   morning review '30 7 * * 1-5' in Europe/Zurich: next at" in out
    assert "FAIL [vault.morning_review]" not in out
