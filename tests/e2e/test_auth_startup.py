"""Auth settings that would leave the daemon open refuse to start, saying what to fix."""

from __future__ import annotations

import pytest
from memoryd_client import MemoryClient

pytestmark = pytest.mark.e2e


def _serve(memoryd_cli, tmp_path, *flags, listen="127.0.0.1:0", env=None):
    return memoryd_cli(
        "serve", "--listen", listen, "--data-dir", str(tmp_path / "data"), *flags, env=env or {}
    )


@pytest.mark.parametrize(
    ("token", "said"),
    [pytest.param("", "is empty", id="empty"), pytest.param("short-secret", "12 char", id="short")],
)
def test_an_empty_or_short_token_refuses_to_start(memoryd_cli, tmp_path, token, said):
    result = _serve(memoryd_cli, tmp_path, env={"MEMORYD_AUTH_TOKEN": token})
    assert result.returncode == 2, result.stderr
    assert "MEMORYD_AUTH_TOKEN" in result.stderr and said in result.stderr
    assert "at least 16" in result.stderr
    assert "Traceback" not in result.stderr
    assert "serving on" not in result.stdout


def test_a_non_loopback_address_without_credentials_needs_insecure(memoryd_cli, tmp_path):
    result = _serve(memoryd_cli, tmp_path, listen="0.0.0.0:0")
    assert result.returncode == 2, result.stderr
    assert "--insecure" in result.stderr and "MEMORYD_AUTH_TOKEN" in result.stderr
    assert "Traceback" not in result.stderr


def test_insecure_serves_a_non_loopback_address_open(make_daemon):
    daemon = make_daemon(listen="0.0.0.0:0", args=["--insecure"]).start()
    try:
        assert daemon.address.startswith("0.0.0.0:"), daemon.address
        port = int(daemon.address.rsplit(":", 1)[1])
        with MemoryClient(f"127.0.0.1:{port}", timeout=30.0) as c:
            assert c.store("open-agent", "Served open on purpose.").outcome == 1
    finally:
        assert daemon.stop() == 0


def test_a_broken_keys_file_refuses_to_start_naming_the_entry(memoryd_cli, tmp_path):
    keys = tmp_path / "keys.toml"
    keys.write_text('[[key]]\nname = "gw"\nsha256 = "abc"\nagents = ["a-*"]\n')
    result = _serve(memoryd_cli, tmp_path, env={"MEMORYD_AUTH__KEYS_FILE": str(keys)})
    assert result.returncode == 2, result.stderr
    assert str(keys) in result.stderr and "sha256" in result.stderr
    assert "Traceback" not in result.stderr


def test_keys_new_prints_a_secret_and_its_entry(memoryd_cli, tmp_path):
    import hashlib
    import tomllib

    result = memoryd_cli("keys", "new", "gateway-a", "--agents", "tenant-a-*", "main")
    assert result.returncode == 0, result.stderr
    secret = result.stdout.split("it is not stored anywhere): ", 1)[1].split()[0]
    entry_text = result.stdout.split("(auth.keys_file):", 1)[1]
    (key,) = tomllib.loads(entry_text)["key"]
    assert key["name"] == "gateway-a"
    assert key["sha256"] == hashlib.sha256(secret.encode()).hexdigest()
    assert key["agents"] == ["tenant-a-*", "main"] and key["operator"] is False
    assert len(secret) >= 32 and secret not in entry_text  # the file never holds it
    assert key["reviewer"] is False

    person = memoryd_cli("keys", "new", "alice", "--agents", "main", "--reviewer")
    (entry,) = tomllib.loads(person.stdout.split("(auth.keys_file):", 1)[1])["key"]
    assert entry["reviewer"] is True and entry["operator"] is False


def test_ctl_without_the_daemons_key_says_where_it_reads_one(make_daemon, memoryd_cli):
    token = "walk-" + "k" * 20
    daemon = make_daemon(env={"MEMORYD_AUTH_TOKEN": token}).start()
    try:
        bare = memoryd_cli("ctl", "--address", daemon.address, "stats", "main")
        assert bare.returncode == 1, bare.stderr
        assert bare.stderr.startswith("memoryd ctl: UNAUTHENTICATED: ")
        assert "sends the key in MEMORYD_AUTH_TOKEN, which is not set" in bare.stderr
        wrong = memoryd_cli(
            "ctl", "--address", daemon.address, "stats", "main",
            env={"MEMORYD_AUTH_TOKEN": "walk-" + "w" * 20},
        )  # fmt: skip
        assert wrong.returncode == 1 and "not one the daemon knows" in wrong.stderr
        right = memoryd_cli(
            "ctl", "--address", daemon.address, "stats", "main", env={"MEMORYD_AUTH_TOKEN": token}
        )
        assert right.returncode == 0 and "memories visible to main: 0" in right.stdout
    finally:
        assert daemon.stop() == 0
