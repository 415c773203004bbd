"""An S3-compatible server on loopback for tests: moto in server mode (from PyPI), which
enforces conditional PUT (``If-None-Match: *``), the primitive Lance's commits on object
storage rely on for concurrent writers."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ACCESS_KEY = "memoryd-test-key"
SECRET_KEY = "memoryd-test-secret"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> S3Server:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not listen on {self.port}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_bucket(self) -> str:
        name = f"memoryd-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def daemon_env(self, uri: str, endpoint: str = "") -> Mapping[str, str]:
        """What a daemon needs to keep its store at ``uri`` here (or through ``endpoint``,
        a proxy): credentials from the environment only, endpoint and plain HTTP as
        storage options."""
        options = f'{{"aws_endpoint": "{endpoint or self.endpoint}", "allow_http": "true"}}'
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "MEMORYD_STORAGE__URI": uri,
            "MEMORYD_STORAGE__STORAGE_OPTIONS": options,
        }

    def storage_options(self, endpoint: str = "") -> dict[str, str]:
        """LanceDB's (and obstore's) storage options for this server (or a proxy of it)."""
        return {"aws_endpoint": endpoint or self.endpoint, "allow_http": "true"}

    def set_credentials(self, environ: Any) -> None:
        """Put the test credentials into ``environ`` (a monkeypatch or os.environ)."""
        for key, value in (
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
            ("AWS_REGION", REGION),
        ):
            environ.setenv(key, value)


@dataclass
class TcpProxy:
    """A TCP forwarder from a loopback port to ``target_port`` that can be cut (``stop``:
    the listener and every open connection closed, so connecting is refused) and restored
    (``start``) on the same port: an object store outage and its return, without losing the
    in-memory moto server's buckets. ``start(hang=True)``: connections are accepted and
    never answered (a store that hangs rather than refuses)."""

    target_port: int
    port: int = field(default_factory=_free_port)
    _listener: socket.socket | None = None
    _sockets: set[socket.socket] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    hang: bool = False

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, hang: bool = False) -> TcpProxy:
        self.hang = hang
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            if self.hang:
                with self._lock:
                    self._sockets.add(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
