"""One maintainer per shared store: a lease object in the bucket, written by conditional PUT.

Several daemons over one object-store table (``storage.uri = s3://...``) all append to it,
but only one at a time compacts it and deletes old versions: the holder of the lease
``<prefix>/_memoryd/maintenance.lease``, a small JSON object (owner, host, pid, a renewal
counter). Nothing else is coordinated through it; appends never look at it.

- Taking a free lease: a PUT with ``If-None-Match: *`` (obstore ``mode="create"``): of two
  daemons racing, the store accepts one.
- Renewing it, and taking over one its holder released or stopped renewing: a PUT with
  ``If-Match: <etag of what we read>`` (``mode={"e_tag": ...}``), so a renewal and a
  takeover racing each other cannot both win.
- Expiry without trusting clocks across machines: a daemon that sees the same etag for
  ``ttl`` seconds on its own monotonic clock takes the lease over. The holder counts its
  lease as held for only ``ttl / 2`` after the start of its last successful renewal (it
  renews every ``ttl / 4``), so it stops maintaining before anyone may take over, however
  the machines' wall clocks differ (rates of clocks are assumed alike, not their values).
- A holder that cannot reach the store stops maintaining when ``ttl / 2`` has passed; one
  killed with kill -9 is replaced ``ttl`` seconds after another daemon first saw its last
  renewal. One stopping cleanly writes ``released`` so another takes over at once.

The lease makes maintenance one-at-a-time; safety does not rest on it. A compaction that
overlaps another (a holder paused past its lease) is refused at commit by Lance's own
conflict check, and Lance's cleanup deletes no file that a kept version references, nor a
file no manifest references yet (an append in flight) unless it is 7 days old.

The conditional PUTs go through obstore (the Python binding of the Rust ``object_store``
crate that LanceDB itself uses), so ``storage.storage_options`` mean the same to both.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    PreconditionError,
    UnknownConfigurationKeyError,
)
from obstore.store import from_url

log = logging.getLogger(__name__)

LEASE_KEY = "_memoryd/maintenance.lease"

# storage_options keys that configure obstore's HTTP client rather than the store itself
# (object_store's ClientConfigKey); LanceDB takes them in the same flat dict.
_CLIENT_KEYS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "http2_keep_alive_interval",
        "http2_keep_alive_timeout",
        "http2_keep_alive_while_idle",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "proxy_ca_certificate",
        "proxy_excludes",
        "randomize_addresses",
        "read_timeout",
        "timeout",
        "user_agent",
    }
)
# Lance's own keys (retries of its object store client, its download retries): no meaning
# to obstore's store config, so they are translated or left out.
_LANCE_KEYS = frozenset({"client_max_retries", "client_retry_timeout", "download_retry_count"})


def open_store(uri: str, storage_options: Mapping[str, str]) -> Any:
    """An obstore store rooted at ``uri`` (``s3://bucket/prefix``), configured from the same
    storage options LanceDB takes; credentials come from the environment as for LanceDB."""
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for key, value in storage_options.items():
        k = key.lower()
        if k in _CLIENT_KEYS:
            client[k] = value.lower() == "true" if value.lower() in ("true", "false") else value
        elif k == "client_max_retries":
            retry["max_retries"] = int(value)
        elif k == "client_retry_timeout":
            retry["retry_timeout"] = timedelta(seconds=float(value))
        elif k not in _LANCE_KEYS:
            config[k] = value
    while True:
        try:
            return from_url(
                uri,
                config=config or None,  # type: ignore[arg-type]
                client_options=client or None,  # type: ignore[arg-type]
                retry_config=retry or None,  # type: ignore[arg-type]
            )
        except UnknownConfigurationKeyError as e:
            # A key LanceDB takes and object_store does not (a Lance-only option): the
            # lease object does without it.
            unknown = next((k for k in config if f"'{k}'" in str(e)), None)
            if unknown is None:
                raise
            log.info("maintenance lease: storage option %r left out (not object_store's)", unknown)
            del config[unknown]


class MaintenanceLease:
    """Holds (or waits for) the maintenance lease of one shared store. ``held()`` says
    whether this daemon may compact and clean up now; a thread renews it."""

    def __init__(
        self,
        store: Any,
        *,
        ttl_seconds: float = 60.0,
        key: str = LEASE_KEY,
        owner: str | None = None,
    ):
        self._store = store
        self.key = key
        self.ttl = ttl_seconds
        self.owner = owner or uuid.uuid4().hex
        self._etag: str | None = None  # of our own last write, while we hold it
        self._held_until = 0.0  # monotonic
        self._seen: tuple[str, float] | None = None  # another's etag, when first seen
        self._renewals = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        self.takeovers = 0

    def held(self) -> bool:
        return time.monotonic() < self._held_until

    def holder(self) -> str | None:
        """The owner id written in the lease now (None if there is none or it is released)."""
        try:
            body, _ = self._read()
        except FileNotFoundError:
            return None
        return None if body.get("released") else str(body.get("owner"))

    def _body(self, *, released: bool = False) -> bytes:
        self._renewals += 1
        return json.dumps(
            {
                "owner": self.owner,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "renewal": self._renewals,  # so every write has a new etag
                "ttl_seconds": self.ttl,
                "released": released,
            }
        ).encode()

    def _read(self) -> tuple[dict[str, Any], str]:
        got = obstore.get(self._store, self.key)
        etag = got.meta["e_tag"]
        try:
            body = json.loads(bytes(got.bytes()))
        except ValueError:
            body = {}
        return (body if isinstance(body, dict) else {}), str(etag)

    def _write(self, mode: Any, started: float) -> bool:
        try:
            result = obstore.put(self._store, self.key, self._body(), mode=mode)
        except (AlreadyExistsError, PreconditionError):
            self._lost()
            return False
        self._etag = result["e_tag"]
        self._held_until = started + self.ttl / 2
        return True

    def _lost(self) -> None:
        if self._etag is not None:
            log.info("maintenance lease %s: another daemon holds it now", self.key)
        self._etag = None
        self._held_until = 0.0

    def try_acquire(self) -> bool:
        """One round: take the lease if free, released or expired, renew it if ours.
        Returns whether it is held now. Errors reaching the store propagate."""
        with self._lock:
            started = time.monotonic()
            try:
                body, etag = self._read()
            except FileNotFoundError:
                return self._write("create", started)
            if body.get("owner") == self.owner and etag == self._etag:
                return self._write({"e_tag": etag}, started)
            self._lost()
            if body.get("released"):
                return self._take(etag, started, "released")
            if self._seen is None or self._seen[0] != etag:
                self._seen = (etag, started)
                return False
            if started - self._seen[1] >= self.ttl:
                return self._take(etag, started, f"not renewed for {self.ttl:.0f}s")
            return False

    def _take(self, etag: str, started: float, why: str) -> bool:
        if not self._write({"e_tag": etag}, started):
            return False
        self.takeovers += 1
        log.info("maintenance lease %s taken over (%s)", self.key, why)
        return True

    def release(self) -> None:
        """Hand the lease back (if held) so another daemon need not wait for it to expire."""
        with self._lock:
            if self._etag is None:
                return
            try:
                obstore.put(
                    self._store, self.key, self._body(released=True), mode={"e_tag": self._etag}
                )
            except Exception as e:  # it expires by itself
                log.debug("releasing the maintenance lease failed: %s", e)
            self._etag = None
            self._held_until = 0.0

    # -- the renewing thread --------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="memoryd-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.release()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_acquire()
            except Exception as e:  # the store unreachable: not held once ttl/2 passed
                if not self._failing:
                    log.warning("maintenance lease %s: cannot reach the store: %s", self.key, e)
                self._failing = True
            else:
                self._failing = False
            self._stop.wait(self.ttl / 4)
