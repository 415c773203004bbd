"""mTLS: a client certificate's identity maps to a principal through the keys file.

The certificates are made for the test with the openssl command line: a CA, a server
certificate for 127.0.0.1, and two client certificates, one listed in the keys file
(``gw-cert`` acting for ``tenant-c-*``) and one not.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import grpc
import pytest
from memoryd_client import MemoryClient, MemorydError, tls_credentials

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command"),
]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(cwd: Path, name: str, subject: str, ext: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-subj", subject, "-out", f"{name}.csr", cwd=cwd)  # fmt: skip
    (cwd / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.pem",
             "-extfile", f"{name}.ext", cwd=cwd)  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-subj", "/CN=memoryd test CA", "-days", "2", "-out", "ca.pem", cwd=d)  # fmt: skip
    _signed(d, "server", "/CN=memoryd", "subjectAltName=IP:127.0.0.1\n")
    _signed(d, "listed", "/CN=gw-cert", "extendedKeyUsage=clientAuth\n")
    _signed(d, "unlisted", "/CN=stranger", "extendedKeyUsage=clientAuth\n")
    return d


@pytest.fixture(scope="module")
def mtls_daemon(start_daemon, pki):
    keys = pki / "keys.toml"
    keys.write_text(
        '[[key]]\nname = "gw-cert"\ntls_identity = "gw-cert"\nagents = ["tenant-c-*"]\n'
    )
    return start_daemon(
        env={
            "MEMORYD_SERVER__TLS_CERT": str(pki / "server.pem"),
            "MEMORYD_SERVER__TLS_KEY": str(pki / "server.key"),
            "MEMORYD_SERVER__TLS_CLIENT_CA": str(pki / "ca.pem"),
            "MEMORYD_AUTH__KEYS_FILE": str(keys),
        }
    )


def _client(daemon, pki, cert: str | None) -> MemoryClient:
    creds = tls_credentials(
        ca=pki / "ca.pem",
        cert=pki / f"{cert}.pem" if cert else None,
        key=pki / f"{cert}.key" if cert else None,
    )
    return MemoryClient(daemon.address, credentials=creds, timeout=10.0, retries=0)


def test_a_listed_client_certificate_acts_for_its_agents(mtls_daemon, pki, rejects):
    agent = f"tenant-c-{uuid.uuid4().hex[:8]}"
    with _client(mtls_daemon, pki, "listed") as c:
        stored = c.store(agent, "Tenant C signs in with a certificate.").memory
        assert c.get(agent, stored.id).text == stored.text
        rejects(grpc.StatusCode.PERMISSION_DENIED, c.stats, "tenant-d-1", mentions=["gw-cert"])


def test_an_unlisted_certificate_is_unauthenticated(mtls_daemon, pki, rejects):
    with _client(mtls_daemon, pki, "unlisted") as c:
        rejects(grpc.StatusCode.UNAUTHENTICATED, c.stats, "tenant-c-1")


def test_no_client_certificate_cannot_connect(mtls_daemon, pki):
    with _client(mtls_daemon, pki, None) as c, pytest.raises(MemorydError) as caught:
        c.stats("tenant-c-1")
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE


def test_ctl_doctor_checks_health_over_the_same_tls(mtls_daemon, pki):
    """``ctl doctor`` with the TLS flags asks Health over TLS too (it used plaintext, so a
    daemon serving TLS looked down while every other check passed)."""
    import subprocess
    import sys
    from pathlib import Path

    memoryd = str(Path(sys.executable).with_name("memoryd"))
    result = subprocess.run(
        [memoryd, "ctl", "--address", mtls_daemon.address,
         "--tls-ca", str(pki / "ca.pem"), "--tls-cert", str(pki / "listed.pem"),
         "--tls-key", str(pki / "listed.key"), "doctor", "tenant-c-doctor"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "ok   health: SERVING" in result.stdout
    assert "ok   store: 0 memories visible to tenant-c-doctor" in result.stdout
