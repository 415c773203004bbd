"""An S3-compatible server on loopback for tests: moto in server mode (from PyPI), which
enforces conditional PUT (``If-None-Match: *``), the primitive Lance's commits on object
storage rely on for concurrent writers."""

from __future__ import annotations

import socket
import subprocess
import sys
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

    def daemon_env(self, uri: str) -> Mapping[str, str]:
        """What a daemon needs to keep its store at ``uri`` here: credentials from the
        environment only, endpoint and plain HTTP as storage options."""
        options = f'{{"aws_endpoint": "{self.endpoint}", "allow_http": "true"}}'
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "MEMORYD_STORAGE__URI": uri,
            "MEMORYD_STORAGE__STORAGE_OPTIONS": options,
        }
