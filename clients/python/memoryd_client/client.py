"""Sync and asyncio clients. Deadlines on every call; idempotent calls are retried on
UNAVAILABLE (daemon starting or restarting) with exponential backoff; every failure is a
``MemorydError`` of the subclass named after its gRPC status (``memoryd_client.errors``),
carrying the status code, the daemon's message and its trailers."""

from __future__ import annotations

import asyncio
import builtins
import copy
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hooks_grpc
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc as pb_grpc
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client._gen.memoryd.v1 import review_pb2_grpc as review_grpc
from memoryd_client.errors import MemorydError, error_from_rpc
from memoryd_client.tracing import aio_interceptors, traced_channel

__all__ = [
    "AsyncMemoryClient",
    "MemoryClient",
    "MemorydError",
    "tls_credentials",
]

T = TypeVar("T")

RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE})


def _cat(value: int) -> pb.Category.ValueType:
    return pb.Category.ValueType(value)


def _ts(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def store_request(
    agent_id: str,
    text: str,
    *,
    category: int = 0,
    importance: float | None = None,
    scope: str = "",
    metadata: Mapping[str, str] | None = None,
    idempotency_key: str = "",
    created_at: datetime | None = None,
    expires_at: datetime | None = None,
    ttl: int = 0,
) -> pb.StoreRequest:
    req = pb.StoreRequest(
        agent_id=agent_id,
        text=text,
        category=_cat(category),
        scope=scope,
        metadata=dict(metadata or {}),
        idempotency_key=idempotency_key,
        created_at=_ts(created_at),
        expires_at=_ts(expires_at),
        ttl=pb.Ttl.ValueType(ttl),
    )
    if importance is not None:
        req.importance = importance
    return req


def recall_request(
    agent_id: str,
    query: str,
    *,
    limit: int = 0,
    min_score: float = 0.0,
    categories: Iterable[int] = (),
    scopes: Iterable[str] = (),
    options: pb.RecallOptions | None = None,
    explain: bool = False,
    full_text: bool = False,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    reference_time: datetime | None = None,
    timezone: str = "",
    ignore_time_expressions: bool = False,
) -> pb.RecallRequest:
    """``created_after``/``created_before`` filter by created_at; time expressions in the
    query ("last week", "letzte Woche", "上周") resolve against ``reference_time`` (default
    now) in the IANA ``timezone`` (default: the daemon's recall.timezone)."""
    return pb.RecallRequest(
        agent_id=agent_id,
        query=query,
        limit=limit,
        min_score=min_score,
        categories=[_cat(c) for c in categories],
        scopes=list(scopes),
        options=options,
        explain=explain,
        full_text=full_text,
        created_after=_ts(created_after),
        created_before=_ts(created_before),
        reference_time=_ts(reference_time),
        timezone=timezone,
        ignore_time_expressions=ignore_time_expressions,
    )


def forget_request(agent_id: str, *, id: str = "", query: str = "") -> pb.ForgetRequest:
    if bool(id) == bool(query):
        raise ValueError("forget needs exactly one of id or query")
    return (
        pb.ForgetRequest(agent_id=agent_id, id=id)
        if id
        else pb.ForgetRequest(agent_id=agent_id, query=query)
    )


def list_request(
    agent_id: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    scopes: Iterable[str] = (),
    categories: Iterable[int] = (),
    oldest_first: bool = False,
) -> pb.ListRequest:
    return pb.ListRequest(
        agent_id=agent_id,
        oldest_first=oldest_first,
        page_size=page_size,
        page_token=page_token,
        scopes=list(scopes),
        categories=[_cat(c) for c in categories],
    )


def update_request(
    agent_id: str,
    id: str,
    *,
    text: str | None = None,
    importance: float | None = None,
    category: int = 0,
    metadata: Mapping[str, str] | None = None,
    replace_metadata: bool = False,
    remove_metadata_keys: Iterable[str] = (),
    expires_at: datetime | None = None,
    clear_expires_at: bool = False,
) -> pb.UpdateRequest:
    req = pb.UpdateRequest(
        agent_id=agent_id,
        id=id,
        category=_cat(category),
        metadata=dict(metadata or {}),
        replace_metadata=replace_metadata,
        remove_metadata_keys=list(remove_metadata_keys),
        expires_at=_ts(expires_at),
        clear_expires_at=clear_expires_at,
    )
    if text is not None:
        req.text = text
    if importance is not None:
        req.importance = importance
    return req


def tls_credentials(
    *,
    ca: str | os.PathLike[str] | None = None,
    cert: str | os.PathLike[str] | None = None,
    key: str | os.PathLike[str] | None = None,
) -> grpc.ChannelCredentials:
    """Channel credentials from PEM files: ``ca`` verifies the daemon (default: the
    system's roots); ``cert`` and ``key`` are this client's certificate for mTLS."""
    if (cert is None) != (key is None):
        raise ValueError("give cert and key together (mTLS), or neither")

    def read(path: str | os.PathLike[str] | None) -> bytes | None:
        return None if path is None else Path(path).read_bytes()

    return grpc.ssl_channel_credentials(read(ca), read(key), read(cert))


def build_context_request(
    agent_id: str,
    prompt: str,
    *,
    session_id: str = "",
    max_results: int = 0,
    min_score: float = 0.0,
    time_budget_ms: int = 0,
    scopes: Iterable[str] = (),
) -> hooks_pb.BuildContextRequest:
    return hooks_pb.BuildContextRequest(
        agent_id=agent_id,
        session_id=session_id,
        prompt=prompt,
        max_results=max_results,
        min_score=min_score,
        time_budget_ms=time_budget_ms,
        scopes=list(scopes),
    )


def capture_request(
    agent_id: str,
    messages: Iterable[hooks_pb.ChatMessage | tuple[str, str]],
    *,
    session_id: str = "",
    scope: str = "",
) -> hooks_pb.CaptureRequest:
    """``messages``: ChatMessage or ``(role, text)`` pairs, in the turn's order."""
    msgs = [
        m if isinstance(m, hooks_pb.ChatMessage) else hooks_pb.ChatMessage(role=m[0], text=m[1])
        for m in messages
    ]
    return hooks_pb.CaptureRequest(
        agent_id=agent_id, session_id=session_id, messages=msgs, scope=scope
    )


def _channel_args() -> list[tuple[str, Any]]:
    return [("grpc.enable_retries", 0)]


def _metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def _backoff(
    error: MemorydError, attempt: int, retries: int, idempotent: bool, delay: float
) -> float:
    """Seconds to wait before retry number ``attempt + 1`` after ``error``; raises ``error``
    when the call must not be retried (out of retries, or not safe or useful to repeat)."""
    wait = error.retry_after
    if attempt >= retries or (wait is None and (not idempotent or error.code not in RETRYABLE)):
        raise error from None
    return wait if wait is not None else delay


class _Client:
    """What both clients keep: the channel, its three service stubs, the call metadata and
    the retry settings."""

    _channel: Any

    def _attach(self, token: str | None, timeout: float, retries: int) -> None:
        self._stub = pb_grpc.MemoryServiceStub(self._channel)
        self._review = review_grpc.ReviewServiceStub(self._channel)
        self._hooks = hooks_grpc.HookServiceStub(self._channel)
        self._metadata = _metadata(token)
        self.timeout = timeout
        self.retries = retries


class MemoryClient(_Client):
    """Blocking client. ``timeout`` is the default deadline of each call, in seconds."""

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        credentials: grpc.ChannelCredentials | None = None,
    ):
        self._channel = traced_channel(
            grpc.secure_channel(address, credentials, options=_channel_args())
            if credentials
            else grpc.insecure_channel(address, options=_channel_args())
        )
        self._attach(token, timeout, retries)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the channel to the daemon is connected (a daemon still loading its
        models answers calls with Unavailable, which idempotent calls retry)."""
        grpc.channel_ready_future(self._channel).result(timeout=timeout)

    def _call(
        self, method: Callable[..., T], request: Any, *, idempotent: bool, timeout: float | None
    ) -> T:
        delay, attempt = 0.05, 0
        while True:
            try:
                return method(request, timeout=timeout or self.timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                wait = _backoff(error_from_rpc(e), attempt, self.retries, idempotent, delay)
                time.sleep(wait)
                delay, attempt = delay * 4, attempt + 1

    def store(
        self, agent_id: str, text: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.StoreResponse:
        req = store_request(agent_id, text, **kw)
        # With an idempotency key a retry cannot store twice.
        return self._call(
            self._stub.Store, req, idempotent=bool(req.idempotency_key), timeout=timeout
        )

    def recall(
        self, agent_id: str, query: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.RecallResponse:
        return self._call(
            self._stub.Recall,
            recall_request(agent_id, query, **kw),
            idempotent=True,
            timeout=timeout,
        )

    def forget(
        self, agent_id: str, *, id: str = "", query: str = "", timeout: float | None = None
    ) -> pb.ForgetResponse:
        return self._call(
            self._stub.Forget,
            forget_request(agent_id, id=id, query=query),
            idempotent=False,
            timeout=timeout,
        )

    def update(
        self, agent_id: str, id: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.UpdateResponse:
        return self._call(
            self._stub.Update, update_request(agent_id, id, **kw), idempotent=False, timeout=timeout
        )

    def get(self, agent_id: str, id: str, *, timeout: float | None = None) -> pb.Memory:
        resp: pb.GetResponse = self._call(
            self._stub.Get,
            pb.GetRequest(agent_id=agent_id, id=id),
            idempotent=True,
            timeout=timeout,
        )
        return resp.memory

    def list(self, agent_id: str, *, timeout: float | None = None, **kw: Any) -> pb.ListResponse:
        """One page; ``kw`` as :func:`list_request`."""
        return self._call(
            self._stub.List, list_request(agent_id, **kw), idempotent=True, timeout=timeout
        )

    def list_all(self, agent_id: str, **kw: Any) -> builtins.list[pb.Memory]:
        """Every page of ``list``, concatenated."""
        out: builtins.list[pb.Memory] = []
        token = ""
        while True:
            page = self.list(agent_id, page_token=token, **kw)
            out.extend(page.memories)
            token = page.next_page_token
            if not token:
                return out

    def export(
        self, agent_id: str, *, scopes: Iterable[str] = (), all_scopes: bool = False
    ) -> Iterator[pb.Memory]:
        """Every memory the agent may read, streamed (no row cap); ``all_scopes``: every
        memory of every agent (needs an operator credential)."""
        request = pb.ExportRequest(agent_id=agent_id, scopes=list(scopes), all_scopes=all_scopes)
        call = self._stub.Export(request, metadata=self._metadata)
        try:
            yield from call
        except grpc.RpcError as e:
            raise error_from_rpc(e) from None

    def import_memories(
        self, agent_id: str, memories: Iterable[pb.Memory], *, timeout: float | None = None
    ) -> pb.ImportResponse:
        """Stream memories (e.g. from ``export``) into the daemon; it re-embeds them."""
        requests = (pb.ImportRequest(agent_id=agent_id, memory=m) for m in memories)
        try:
            return self._stub.Import(requests, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise error_from_rpc(e) from None

    def stream(
        self, requests: Iterable[pb.StreamRequest], *, timeout: float | None = None
    ) -> Iterator[pb.StreamResponse]:
        """Open a Stream session: responses arrive as ops finish, matched by request_id.

        ``requests`` is read on a thread of grpc's as the daemon takes them (a generator may
        block to wait for the next op). A failing op is answered with ``error`` set; the
        session goes on."""
        call = self._stub.Stream(iter(requests), timeout=timeout, metadata=self._metadata)
        try:
            yield from call
        except grpc.RpcError as e:
            raise error_from_rpc(e) from None

    def conflicts(self, agent_id: str, *, limit: int = 0) -> pb.ListConflictsResponse:
        return self._call(
            self._stub.ListConflicts,
            pb.ListConflictsRequest(agent_id=agent_id, limit=limit),
            idempotent=True,
            timeout=None,
        )

    def review_prepare(
        self, request: review_pb.PrepareReviewRequest, *, timeout: float | None = None
    ) -> review_pb.PrepareReviewResponse:
        """Review proposals (ReviewService.Prepare); changes nothing."""
        return self._call(self._review.Prepare, request, idempotent=True, timeout=timeout)

    def review_apply(
        self, request: review_pb.ApplyReviewRequest, *, timeout: float | None = None
    ) -> review_pb.ApplyReviewResponse:
        """Apply approved review items (ReviewService.Apply). Idempotent by design: an item
        already applied is reported ALREADY_APPLIED, so a retry is safe."""
        return self._call(self._review.Apply, request, idempotent=True, timeout=timeout)

    def stats(
        self, agent_id: str, *, daemon_wide: bool = False, timeout: float | None = None
    ) -> pb.StatsResponse:
        request = pb.StatsRequest(agent_id=agent_id, daemon_wide=daemon_wide)
        return self._call(self._stub.Stats, request, idempotent=True, timeout=timeout)

    # HookService. Hooks sit in a gateway's turn with a budget of their own: never retried.
    def build_context(
        self, agent_id: str, prompt: str, *, timeout: float | None = None, **kw: Any
    ) -> hooks_pb.BuildContextResponse:
        req = build_context_request(agent_id, prompt, **kw)
        return self._call(self._hooks.BuildContext, req, idempotent=False, timeout=timeout)

    def capture(
        self,
        agent_id: str,
        messages: Iterable[hooks_pb.ChatMessage | tuple[str, str]],
        *,
        timeout: float | None = None,
        **kw: Any,
    ) -> hooks_pb.CaptureResponse:
        req = capture_request(agent_id, messages, **kw)
        return self._call(self._hooks.Capture, req, idempotent=False, timeout=timeout)


class AsyncMemoryClient(_Client):
    """asyncio client; same methods as MemoryClient, awaitable, plus ``stream``."""

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        credentials: grpc.ChannelCredentials | None = None,
    ):
        self._channel = (
            grpc.aio.secure_channel(
                address, credentials, options=_channel_args(), interceptors=aio_interceptors()
            )
            if credentials
            else grpc.aio.insecure_channel(
                address, options=_channel_args(), interceptors=aio_interceptors()
            )
        )
        self._attach(token, timeout, retries)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def with_token(self, token: str | None) -> AsyncMemoryClient:
        """This client, sending ``token`` (None: no token) instead of its own.

        The copy shares the channel (one connection for every caller: e.g. a server that
        passes each of its callers' tokens through); closing either closes both.
        """
        other = copy.copy(self)
        other._metadata = _metadata(token)
        return other

    async def _call(
        self, method: Any, request: Any, *, idempotent: bool, timeout: float | None
    ) -> Any:
        delay, attempt = 0.05, 0
        while True:
            try:
                return await method(
                    request, timeout=timeout or self.timeout, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as e:
                wait = _backoff(error_from_rpc(e), attempt, self.retries, idempotent, delay)
                await asyncio.sleep(wait)
                delay, attempt = delay * 4, attempt + 1

    async def store(
        self, agent_id: str, text: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.StoreResponse:
        req = store_request(agent_id, text, **kw)
        return await self._call(
            self._stub.Store, req, idempotent=bool(req.idempotency_key), timeout=timeout
        )

    async def recall(
        self, agent_id: str, query: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.RecallResponse:
        return await self._call(
            self._stub.Recall,
            recall_request(agent_id, query, **kw),
            idempotent=True,
            timeout=timeout,
        )

    async def forget(
        self, agent_id: str, *, id: str = "", query: str = "", timeout: float | None = None
    ) -> pb.ForgetResponse:
        return await self._call(
            self._stub.Forget,
            forget_request(agent_id, id=id, query=query),
            idempotent=False,
            timeout=timeout,
        )

    async def update(
        self, agent_id: str, id: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.UpdateResponse:
        return await self._call(
            self._stub.Update, update_request(agent_id, id, **kw), idempotent=False, timeout=timeout
        )

    async def get(self, agent_id: str, id: str, *, timeout: float | None = None) -> pb.Memory:
        resp = await self._call(
            self._stub.Get,
            pb.GetRequest(agent_id=agent_id, id=id),
            idempotent=True,
            timeout=timeout,
        )
        return resp.memory

    async def list(
        self, agent_id: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.ListResponse:
        """One page; ``kw`` as :func:`list_request`."""
        return await self._call(
            self._stub.List, list_request(agent_id, **kw), idempotent=True, timeout=timeout
        )

    async def review_prepare(
        self, request: review_pb.PrepareReviewRequest, *, timeout: float | None = None
    ) -> review_pb.PrepareReviewResponse:
        return await self._call(self._review.Prepare, request, idempotent=True, timeout=timeout)

    async def review_apply(
        self, request: review_pb.ApplyReviewRequest, *, timeout: float | None = None
    ) -> review_pb.ApplyReviewResponse:
        return await self._call(self._review.Apply, request, idempotent=True, timeout=timeout)

    async def stats(
        self, agent_id: str, *, daemon_wide: bool = False, timeout: float | None = None
    ) -> pb.StatsResponse:
        request = pb.StatsRequest(agent_id=agent_id, daemon_wide=daemon_wide)
        return await self._call(self._stub.Stats, request, idempotent=True, timeout=timeout)

    async def build_context(
        self, agent_id: str, prompt: str, *, timeout: float | None = None, **kw: Any
    ) -> hooks_pb.BuildContextResponse:
        req = build_context_request(agent_id, prompt, **kw)
        return await self._call(self._hooks.BuildContext, req, idempotent=False, timeout=timeout)

    async def capture(
        self,
        agent_id: str,
        messages: Iterable[hooks_pb.ChatMessage | tuple[str, str]],
        *,
        timeout: float | None = None,
        **kw: Any,
    ) -> hooks_pb.CaptureResponse:
        req = capture_request(agent_id, messages, **kw)
        return await self._call(self._hooks.Capture, req, idempotent=False, timeout=timeout)

    def stream(
        self,
        requests: AsyncIterator[pb.StreamRequest] | Iterable[pb.StreamRequest],
        *,
        timeout: float | None = None,
    ) -> AsyncIterator[pb.StreamResponse]:
        """Open a Stream session: responses arrive as ops finish, matched by request_id.

        Known grpcio issue (grpc/grpc#36066): when the daemon refuses the whole session
        (e.g. UNAUTHENTICATED) while a request is being written, grpcio's asyncio client
        may report ``INTERNAL: Internal error from Core`` instead; the blocking
        ``MemoryClient.stream`` reports the daemon's status."""
        call = self._stub.Stream(requests, timeout=timeout, metadata=self._metadata)
        return _stream_errors(call)


async def _stream_errors(call: Any) -> AsyncIterator[pb.StreamResponse]:
    try:
        async for response in call:
            yield response
    except grpc.aio.AioRpcError as e:
        raise error_from_rpc(e) from None
