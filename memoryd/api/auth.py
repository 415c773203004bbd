"""Authentication on the wire: which principal (``core.principals``) each call acts as.

Credentials, any mix of:
- ``MEMORYD_AUTH_TOKEN``: one shared bearer token; its holder acts for every agent and is
  an operator (the simplest configuration);
- the keys file (``auth.keys_file``, TOML): API keys, stored as the SHA-256 of the secret
  and never the secret, and client-certificate identities (mTLS), each mapped to a
  principal with the agents it may act for and optionally the operator role. It is read
  again on SIGHUP and when it changes; a file that does not parse keeps the keys in force.

A call sends ``authorization: Bearer <secret>``; without one, a client certificate whose
common name or a subject alternative name is listed authenticates it. Anything else is
UNAUTHENTICATED. The health service stays open so orchestrators can probe the daemon.

Keys file::

    [[key]]
    name = "gateway-a"                 # shown in the access log
    sha256 = "9f86d081884c7d65..."     # hex SHA-256 of the secret (`memoryd keys new`)
    agents = ["tenant-a-*"]            # exact agent ids or * ? patterns
    operator = false                   # daemon-wide Export and Stats
    reviewer = false                   # may approve review promotions into shared scopes

    [[key]]
    name = "ops"
    tls_identity = "ops.example.internal"   # a client certificate's CN or SAN
    agents = ["*"]
    operator = true
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memoryd.api.interceptors import Behavior, Wrap, WrappingInterceptor
from memoryd.core import principals
from memoryd.core.errors import ConfigError, Unauthenticated
from memoryd.core.principals import AGENT_PATTERN_RE, Principal

log = logging.getLogger("memoryd.auth")

OPEN_PREFIXES = ("/grpc.health.v1.Health/",)
MIN_SECRET_CHARS = 16
TOKEN_PRINCIPAL = "auth-token"
_TLS_NAME_KEYS = ("x509_common_name", "x509_subject_alternative_name")


class _KeyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=100)
    sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    tls_identity: str | None = Field(None, min_length=1, max_length=255)
    agents: list[str] = Field(min_length=1)
    operator: bool = False
    reviewer: bool = False

    @field_validator("agents")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for p in value:
            if not AGENT_PATTERN_RE.match(p):
                raise ValueError(f"agent pattern {p!r} is invalid: use A-Z a-z 0-9 . _ - * ?")
        return value


class _KeysFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: list[_KeyEntry] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Credentials:
    by_hash: dict[bytes, Principal] = field(default_factory=dict)
    by_tls: dict[str, Principal] = field(default_factory=dict)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    """A fresh API key secret (256 bits, URL-safe)."""
    return "mk_" + secrets.token_urlsafe(32)


def check_secret(secret: str, what: str) -> None:
    if len(secret) < MIN_SECRET_CHARS:
        said = "empty" if not secret else f"{len(secret)} characters"
        raise ConfigError(
            f"{what} is {said}; a secret needs at least {MIN_SECRET_CHARS} characters "
            "(make one with `memoryd keys new NAME`), or unset it to run without auth "
            "(loopback only)"
        )


def load_keys_file(path: Path) -> Credentials:
    """The credentials of a keys file; ConfigError naming the file and the entry."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read keys file {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"keys file {path} is not valid TOML: {e}") from None
    try:
        parsed = _KeysFile.model_validate(raw)
    except ValidationError as e:
        where = "; ".join(
            f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in e.errors()
        )
        raise ConfigError(f"keys file {path}: {where}") from None
    creds = Credentials()
    names: set[str] = set()
    for i, entry in enumerate(parsed.key):
        if entry.name in names:
            raise ConfigError(f"keys file {path}: key {i}: name {entry.name!r} is used twice")
        names.add(entry.name)
        if (entry.sha256 is None) == (entry.tls_identity is None):
            raise ConfigError(
                f"keys file {path}: key {entry.name!r} needs exactly one of sha256 and tls_identity"
            )
        principal = Principal(entry.name, tuple(entry.agents), entry.operator, entry.reviewer)
        if entry.sha256 is not None:
            digest = bytes.fromhex(entry.sha256)
            if digest == hashlib.sha256(b"").digest():
                raise ConfigError(f"keys file {path}: key {entry.name!r} is the hash of nothing")
            if digest in creds.by_hash:
                raise ConfigError(f"keys file {path}: key {entry.name!r} repeats a secret")
            creds.by_hash[digest] = principal
        else:
            assert entry.tls_identity is not None
            creds.by_tls[entry.tls_identity] = principal
    return creds


class KeyRing:
    """The credentials in force: the shared token and the keys file, reloadable."""

    def __init__(self, token: str | None = None, keys_file: Path | None = None):
        if token is not None:
            check_secret(token, "MEMORYD_AUTH_TOKEN")
        self._token = token
        self.keys_file = keys_file
        self._stamp: tuple[int, int, int] | None = None
        self._creds = self._read()  # at start a bad file stops the daemon
        # Counts the reloads put in force: a call that outlives one (a Stream, an Import)
        # resolves its credential again before its next request (AuthInterceptor).
        self.generation = 0

    def _token_creds(self) -> Credentials:
        creds = Credentials()
        if self._token is not None:
            digest = hashlib.sha256(self._token.encode()).digest()
            creds.by_hash[digest] = Principal(TOKEN_PRINCIPAL, ("*",), operator=True)
        return creds

    def _read(self) -> Credentials:
        creds = self._token_creds()
        if self.keys_file is None:
            return creds
        self._stamp = _stamp(self.keys_file)
        loaded = load_keys_file(self.keys_file)
        return Credentials({**loaded.by_hash, **creds.by_hash}, loaded.by_tls)

    def reload(self) -> bool:
        """Read the keys file again; on any error keep the keys in force. Returns whether
        the new keys are in force."""
        try:
            self._creds = self._read()
        except ConfigError as e:
            log.error("keys file not reloaded, the previous keys stay in force: %s", e)
            return False
        self.generation += 1
        log.info(
            "keys reloaded: %d API keys, %d certificate identities",
            len(self._creds.by_hash),
            len(self._creds.by_tls),
        )
        return True

    async def watch(self, interval: float = 2.0) -> None:
        """Reload whenever the keys file changes (mtime, size or inode)."""
        if self.keys_file is None:
            return
        while True:
            await asyncio.sleep(interval)
            try:
                stamp = _stamp(self.keys_file)
            except OSError:
                continue  # mid-replace, or removed: keep what is in force
            if stamp != self._stamp:
                self._stamp = stamp
                await asyncio.to_thread(self.reload)

    def resolve(self, bearer: bytes | None, tls_names: list[str]) -> Principal | None:
        creds = self._creds
        if bearer is not None:  # a key was sent: it alone decides
            return creds.by_hash.get(hashlib.sha256(bearer).digest()) if bearer else None
        for name in tls_names:
            found = creds.by_tls.get(name)
            if found is not None:
                return found
        return None


def _stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino


_DENIED = (
    "missing or unknown credentials: send metadata 'authorization: Bearer <key>' "
    "(or a client certificate listed in the keys file)"
)


_REVOKED = (
    "the credential this call started with is no longer in the keys file (revoked or "
    "replaced while the call was open): no request sent after that was run"
)


def _as_nobody(behavior: Behavior, streaming: bool) -> Behavior:
    """An open method's behaviour, run as ``principals.NOBODY``: no credential authenticated
    the call (health probes carry none), so the access log names it ``principal=-``, never
    ``local``, the trusted caller of a daemon without auth."""
    if streaming:

        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            principals.CURRENT.set(principals.NOBODY)
            async for response in behavior(request, context):
                yield response

        return stream

    async def unary(request: Any, context: Any) -> Any:
        principals.CURRENT.set(principals.NOBODY)
        return await behavior(request, context)

    return unary


def _bearer(context: Any) -> bytes | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            given = value.encode() if isinstance(value, str) else bytes(value)
            scheme, _, secret = given.partition(b" ")
            return secret if scheme == b"Bearer" and secret else b""
    return None


def _tls_names(context: Any) -> list[str]:
    try:
        auth = context.auth_context() or {}
    except Exception:  # no transport security on this call
        return []
    names: list[str] = []
    for key in _TLS_NAME_KEYS:
        names += [v.decode(errors="replace") for v in auth.get(key, ())]
    return names


class AuthInterceptor(WrappingInterceptor):
    """Resolves each call's principal (or refuses it) and sets ``principals.CURRENT``.

    A call that streams requests (Stream, Import) resolves it again before each request
    that follows a reload of the keys: a key revoked meanwhile ends the call with
    UNAUTHENTICATED (the requests already taken are answered), and one whose agents
    changed acts with the new list from its next request. Before, an open Stream kept the
    credential it started with until the client hung up."""

    def __init__(self, keys: KeyRing):
        super().__init__()
        self.keys = keys

    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap | None:
        if method.startswith(OPEN_PREFIXES):
            return _as_nobody  # anyone's to call: no credential authenticates it
        request_streaming = bool(handler.stream_unary or handler.stream_stream)
        return lambda b, streaming: self._wrap(b, streaming, request_streaming)

    def _principal(self, context: Any) -> Principal:
        found = self.keys.resolve(_bearer(context), _tls_names(context))
        if found is None:
            principals.CURRENT.set(principals.NOBODY)  # (the access log's principal)
            raise Unauthenticated(_DENIED)
        return found

    def _rechecked(
        self, requests: AsyncIterator[Any], context: Any, seen: int
    ) -> AsyncIterator[Any]:
        """``requests``, the principal resolved again before any that comes after a
        reload after generation ``seen`` (read before the call's first resolve, so a
        reload between the two is not missed), and again when its op is about to run
        (``principals.recheck``: a request may wait after it is read, paced by the rate
        limits or for a free slot). (Set here, ``principals.CURRENT`` changes in the
        context of whoever reads the requests, so the ops started from there carry it.)"""
        keys = self.keys

        def recheck() -> None:
            nonlocal seen
            if keys.generation != seen:
                seen = keys.generation
                found = keys.resolve(_bearer(context), _tls_names(context))
                if found is None:
                    raise Unauthenticated(_REVOKED)
                principals.CURRENT.set(found)

        principals.RECHECK.set(recheck)

        async def rechecked() -> AsyncIterator[Any]:
            async for request in requests:
                recheck()
                yield request

        return rechecked()

    def _wrap(self, behavior: Behavior, streaming: bool, request_streaming: bool) -> Behavior:
        if streaming:

            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                seen = self.keys.generation
                principals.CURRENT.set(self._principal(context))
                if request_streaming:
                    request = self._rechecked(request, context, seen)
                async for response in behavior(request, context):
                    yield response

            return stream

        async def unary(request: Any, context: Any) -> Any:
            seen = self.keys.generation
            principals.CURRENT.set(self._principal(context))
            if request_streaming:
                request = self._rechecked(request, context, seen)
            return await behavior(request, context)

        return unary
