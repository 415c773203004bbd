"""Sync and asyncio clients. Deadlines on every call; idempotent calls are retried on
UNAVAILABLE (daemon starting or restarting) with exponential backoff; every failure is a
``MemorydError`` of the subclass named after its gRPC status (``memoryd_client.errors``),
carrying the status code, the daemon's message and its trailers.

Given several daemon addresses, a client routes each call by its agent id and fails over
to the agent's next daemon (``memoryd_client.routing`` states the rule); every Store and
Capture then carries an idempotency key, made here when the caller gave none."""

from __future__ import annotations

import asyncio
import builtins
import copy
import os
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hooks_grpc
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc as pb_grpc
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client._gen.memoryd.v1 import review_pb2_grpc as review_grpc
from memoryd_client.errors import MemorydError, Unavailable, error_from_rpc
from memoryd_client.routing import Fleet, check_addresses, new_idempotency_key, rendezvous_order
from memoryd_client.tracing import aio_interceptors, traced_channel

__all__ = [
    "AsyncMemoryClient",
    "MemoryClient",
    "MemorydError",
    "tls_credentials",
]


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
    idempotency_key: str = "",
) -> hooks_pb.CaptureRequest:
    """``messages``: ChatMessage or ``(role, text)`` pairs, in the turn's order."""
    msgs = [
        m if isinstance(m, hooks_pb.ChatMessage) else hooks_pb.ChatMessage(role=m[0], text=m[1])
        for m in messages
    ]
    return hooks_pb.CaptureRequest(
        agent_id=agent_id,
        session_id=session_id,
        messages=msgs,
        scope=scope,
        idempotency_key=idempotency_key,
    )


def _channel_args(fleet: bool = False) -> list[tuple[str, Any]]:
    args: list[tuple[str, Any]] = [("grpc.enable_retries", 0)]
    if fleet:
        # A daemon that was down is reconnected to within a second of its return (grpc's
        # default back-off grows to two minutes), so its agents come back to it.
        args += [
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
    return args


def _open_channel(
    address: str, credentials: grpc.ChannelCredentials | None, *, aio: bool, fleet: bool
) -> Any:
    """The one place channels are made (one per daemon address)."""
    options = _channel_args(fleet)
    if aio:
        # aio_interceptors: the caller's OpenTelemetry context as traceparent (tracing.py)
        if credentials:
            return grpc.aio.secure_channel(
                address, credentials, options=options, interceptors=aio_interceptors()
            )
        return grpc.aio.insecure_channel(address, options=options, interceptors=aio_interceptors())
    if credentials:
        return traced_channel(grpc.secure_channel(address, credentials, options=options))
    return traced_channel(grpc.insecure_channel(address, options=options))


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


_READY = grpc.ChannelConnectivity.READY
_DOWN = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


class _Endpoint:
    """One daemon: its address, channel and three service stubs."""

    def __init__(self, address: str, channel: Any):
        self.address = address
        self.channel = channel
        self.memory = pb_grpc.MemoryServiceStub(channel)
        self.review = review_grpc.ReviewServiceStub(channel)
        self.hooks = hooks_grpc.HookServiceStub(channel)


class _SyncEndpoint(_Endpoint):
    """A daemon of a fleet, for the blocking client: grpc's watcher thread keeps its
    channel's connectivity here, so a call knows without waiting whether it is connected."""

    def __init__(self, address: str, channel: Any):
        super().__init__(address, channel)
        self._state: grpc.ChannelConnectivity | None = None
        self._changed = threading.Condition()
        self._asked = 0.0  # when connect() last asked grpc to connect
        channel.subscribe(self._seen, try_to_connect=True)

    def _seen(self, state: grpc.ChannelConnectivity) -> None:
        with self._changed:
            self._state = state
            self._changed.notify_all()

    def connect(self, timeout: float) -> bool:
        """True once connected; False at once when the last attempt failed (grpc keeps
        reconnecting in the background), or after ``timeout`` seconds."""
        with self._changed:
            if self._state is _READY:
                return True
            if self._state in _DOWN:
                return False
            idle = self._state is grpc.ChannelConnectivity.IDLE
        if idle:  # the connection went away: ask grpc to connect again
            self._asked = time.monotonic()
            self.channel.subscribe(_ignore, try_to_connect=True)
            self.channel.unsubscribe(_ignore)
        with self._changed:
            self._changed.wait_for(lambda: self._state is _READY or self._state in _DOWN, timeout)
            return self._state is _READY

    def close(self) -> None:
        # grpc's watcher thread takes a request to connect within 0.2 s; closing the channel
        # before it did makes that thread fail ("Channel closed!", grpcio 1.85).
        time.sleep(max(0.0, self._asked + 0.25 - time.monotonic()))
        self.channel.unsubscribe(self._seen)
        self.channel.close()


def _ignore(state: grpc.ChannelConnectivity) -> None:
    pass


class _AsyncEndpoint(_Endpoint):
    async def connect(self, timeout: float) -> bool:
        """As ``_SyncEndpoint.connect``, from the asyncio channel's own state."""
        state = self.channel.get_state(try_to_connect=True)
        try:
            async with asyncio.timeout(timeout):
                while state is not _READY and state not in _DOWN:
                    await self.channel.wait_for_state_change(state)
                    state = self.channel.get_state()
        except TimeoutError:
            return False
        return bool(state is _READY)


def _no_connection(endpoint: _Endpoint, timeout: float) -> Unavailable:
    return Unavailable(
        grpc.StatusCode.UNAVAILABLE,
        f"no connection to the daemon at {endpoint.address} (refused, or none within "
        f"connect_timeout {timeout:g}s)",
    )


class _Client:
    """What both clients keep: one endpoint per daemon (and the fleet's down marks when
    there are several), the call metadata and the retry settings."""

    _endpoints: Sequence[_Endpoint]
    _fleet: Fleet | None

    def _attach(
        self,
        endpoints: Sequence[_Endpoint],
        fleet: Fleet | None,
        token: str | None,
        timeout: float,
        retries: int,
        connect_timeout: float,
    ) -> None:
        self._endpoints = endpoints
        self._fleet = fleet
        first = endpoints[0]
        self._channel = first.channel
        self._stub, self._review, self._hooks = first.memory, first.review, first.hooks
        self._metadata = _metadata(token)
        self.timeout = timeout
        self.retries = retries
        self.connect_timeout = connect_timeout

    @property
    def addresses(self) -> list[str]:
        """The daemons' addresses, as given."""
        return [e.address for e in self._endpoints]

    def daemons_for(self, agent_id: str) -> list[str]:
        """The daemons that serve ``agent_id``, first choice first (its rendezvous order;
        the one address of a single-daemon client)."""
        order = rendezvous_order(self.addresses, agent_id)
        return [self._endpoints[i].address for i in order]

    def _keyed(self, key: str) -> str:
        """The idempotency key to send: the caller's, or (over a fleet, where a call may be
        sent again to another daemon) a new one."""
        return key or (new_idempotency_key() if self._fleet is not None else "")


def _addresses(address: str | Sequence[str]) -> list[str]:
    return check_addresses([address] if isinstance(address, str) else address)


class MemoryClient(_Client):
    """Blocking client. ``timeout`` is the default deadline of each call, in seconds.

    ``address`` is one daemon, or a list of daemons serving one store: each call then goes
    to its agent's daemon and fails over to the agent's next one (``memoryd_client.routing``);
    ``connect_timeout`` bounds the wait for a connection to one daemon, and a daemon that
    failed is skipped for ``down_for`` seconds."""

    def __init__(
        self,
        address: str | Sequence[str] = "127.0.0.1:50051",
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        credentials: grpc.ChannelCredentials | None = None,
        connect_timeout: float = 1.0,
        down_for: float = 2.0,
    ):
        addresses = _addresses(address)
        fleet = Fleet(addresses, down_for=down_for) if len(addresses) > 1 else None
        endpoints = [
            (_SyncEndpoint if fleet else _Endpoint)(
                a, _open_channel(a, credentials, aio=False, fleet=fleet is not None)
            )
            for a in addresses
        ]
        self._attach(endpoints, fleet, token, timeout, retries, connect_timeout)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for endpoint in self._endpoints:
            if isinstance(endpoint, _SyncEndpoint):
                endpoint.close()
            else:
                endpoint.channel.close()

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the channel to the daemon (to any one, over a fleet) is connected (a
        daemon still loading its models answers calls with Unavailable, which idempotent
        calls retry); raises ``grpc.FutureTimeoutError`` after ``timeout`` seconds."""
        if self._fleet is None:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
            return
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            for endpoint in self._endpoints:
                if isinstance(endpoint, _SyncEndpoint) and endpoint.connect(min(left, 0.2)):
                    return
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        raise grpc.FutureTimeoutError()

    def _call(
        self,
        rpc: str,
        request: Any,
        *,
        idempotent: bool,
        timeout: float | None,
        again: bool = True,
    ) -> Any:
        """``rpc`` ("memory.Store") on the request's agent's daemon, failing over when
        ``idempotent``, and retried after a back-off on UNAVAILABLE when ``again`` too."""
        method = attrgetter(rpc)
        delay, attempt = 0.05, 0
        while True:
            try:
                return self._route(method, request, idempotent, timeout or self.timeout)
            except MemorydError as error:
                wait = _backoff(error, attempt, self.retries, idempotent and again, delay)
            time.sleep(wait)
            delay, attempt = delay * 4, attempt + 1

    def _route(self, method: Any, request: Any, idempotent: bool, timeout: float) -> Any:
        """One pass: the agent's daemons in order, until one answers (or fails in a way that
        must not fail over, raised as it is)."""
        if self._fleet is None:
            try:
                return method(self._endpoints[0])(request, timeout=timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                raise error_from_rpc(e) from None
        failed: MemorydError | None = None
        for i in self._fleet.order(request.agent_id):
            endpoint = self._endpoints[i]
            assert isinstance(endpoint, _SyncEndpoint)
            if not endpoint.connect(self.connect_timeout):
                self._fleet.mark_down(i)  # nothing was sent: any call may go on
                failed = _no_connection(endpoint, self.connect_timeout)
                continue
            try:
                response = method(endpoint)(request, timeout=timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                error = error_from_rpc(e)
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise error from None
                self._fleet.mark_down(i)
                if not idempotent:  # it may have reached the daemon: never sent again
                    raise error from None
                failed = error
                continue
            self._fleet.mark_up(i)
            return response
        assert failed is not None
        raise failed

    def _pick(self, agent_id: str) -> _Endpoint:
        """The daemon for a streaming call (never sent again once it starts)."""
        if self._fleet is None:
            return self._endpoints[0]
        for i in self._fleet.order(agent_id):
            endpoint = self._endpoints[i]
            assert isinstance(endpoint, _SyncEndpoint)
            if endpoint.connect(self.connect_timeout):
                return endpoint
            self._fleet.mark_down(i)
        raise _no_connection(endpoint, self.connect_timeout)

    def store(
        self, agent_id: str, text: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.StoreResponse:
        req = store_request(agent_id, text, **kw)
        req.idempotency_key = self._keyed(req.idempotency_key)
        # With an idempotency key a retry cannot store twice.
        return self._call(
            "memory.Store", req, idempotent=bool(req.idempotency_key), timeout=timeout
        )

    def recall(
        self, agent_id: str, query: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.RecallResponse:
        return self._call(
            "memory.Recall",
            recall_request(agent_id, query, **kw),
            idempotent=True,
            timeout=timeout,
        )

    def forget(
        self, agent_id: str, *, id: str = "", query: str = "", timeout: float | None = None
    ) -> pb.ForgetResponse:
        return self._call(
            "memory.Forget",
            forget_request(agent_id, id=id, query=query),
            idempotent=False,
            timeout=timeout,
        )

    def update(
        self, agent_id: str, id: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.UpdateResponse:
        return self._call(
            "memory.Update", update_request(agent_id, id, **kw), idempotent=False, timeout=timeout
        )

    def get(self, agent_id: str, id: str, *, timeout: float | None = None) -> pb.Memory:
        resp: pb.GetResponse = self._call(
            "memory.Get",
            pb.GetRequest(agent_id=agent_id, id=id),
            idempotent=True,
            timeout=timeout,
        )
        return resp.memory

    def list(self, agent_id: str, *, timeout: float | None = None, **kw: Any) -> pb.ListResponse:
        """One page; ``kw`` as :func:`list_request`."""
        return self._call(
            "memory.List", list_request(agent_id, **kw), idempotent=True, timeout=timeout
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
        call = self._pick(agent_id).memory.Export(request, metadata=self._metadata)
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
            endpoint = self._pick(agent_id)
            return endpoint.memory.Import(requests, timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise error_from_rpc(e) from None

    def stream(
        self,
        requests: Iterable[pb.StreamRequest],
        *,
        timeout: float | None = None,
        agent_id: str = "",
    ) -> Iterator[pb.StreamResponse]:
        """Open a Stream session: responses arrive as ops finish, matched by request_id.

        ``requests`` is read on a thread of grpc's as the daemon takes them (a generator may
        block to wait for the next op). A failing op is answered with ``error`` set; the
        session goes on. Over a fleet the session goes to ``agent_id``'s daemon (the agent
        whose ops it carries)."""
        call = self._pick(agent_id).memory.Stream(
            iter(requests), timeout=timeout, metadata=self._metadata
        )
        try:
            yield from call
        except grpc.RpcError as e:
            raise error_from_rpc(e) from None

    def conflicts(self, agent_id: str, *, limit: int = 0) -> pb.ListConflictsResponse:
        return self._call(
            "memory.ListConflicts",
            pb.ListConflictsRequest(agent_id=agent_id, limit=limit),
            idempotent=True,
            timeout=None,
        )

    def review_prepare(
        self, request: review_pb.PrepareReviewRequest, *, timeout: float | None = None
    ) -> review_pb.PrepareReviewResponse:
        """Review proposals (ReviewService.Prepare); changes nothing."""
        return self._call("review.Prepare", request, idempotent=True, timeout=timeout)

    def review_apply(
        self, request: review_pb.ApplyReviewRequest, *, timeout: float | None = None
    ) -> review_pb.ApplyReviewResponse:
        """Apply approved review items (ReviewService.Apply). Idempotent by design: an item
        already applied is reported ALREADY_APPLIED, so a retry is safe."""
        return self._call("review.Apply", request, idempotent=True, timeout=timeout)

    def stats(
        self, agent_id: str, *, daemon_wide: bool = False, timeout: float | None = None
    ) -> pb.StatsResponse:
        request = pb.StatsRequest(agent_id=agent_id, daemon_wide=daemon_wide)
        return self._call("memory.Stats", request, idempotent=True, timeout=timeout)

    # HookService. Hooks sit in a gateway's turn with a budget of their own: never retried
    # (over a fleet, BuildContext (a read) and a keyed Capture fail over to the next daemon).
    def build_context(
        self, agent_id: str, prompt: str, *, timeout: float | None = None, **kw: Any
    ) -> hooks_pb.BuildContextResponse:
        req = build_context_request(agent_id, prompt, **kw)
        return self._call("hooks.BuildContext", req, idempotent=True, timeout=timeout, again=False)

    def capture(
        self,
        agent_id: str,
        messages: Iterable[hooks_pb.ChatMessage | tuple[str, str]],
        *,
        timeout: float | None = None,
        **kw: Any,
    ) -> hooks_pb.CaptureResponse:
        req = capture_request(agent_id, messages, **kw)
        req.idempotency_key = self._keyed(req.idempotency_key)
        return self._call(
            "hooks.Capture", req, idempotent=bool(req.idempotency_key), timeout=timeout, again=False
        )


class AsyncMemoryClient(_Client):
    """asyncio client; same methods as MemoryClient, awaitable, plus ``stream``."""

    def __init__(
        self,
        address: str | Sequence[str] = "127.0.0.1:50051",
        *,
        token: str | None = None,
        timeout: float = 10.0,
        retries: int = 3,
        credentials: grpc.ChannelCredentials | None = None,
        connect_timeout: float = 1.0,
        down_for: float = 2.0,
    ):
        addresses = _addresses(address)
        fleet = Fleet(addresses, down_for=down_for) if len(addresses) > 1 else None
        endpoints = [
            _AsyncEndpoint(a, _open_channel(a, credentials, aio=True, fleet=fleet is not None))
            for a in addresses
        ]
        self._attach(endpoints, fleet, token, timeout, retries, connect_timeout)

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for endpoint in self._endpoints:
            await endpoint.channel.close()

    def with_token(self, token: str | None) -> AsyncMemoryClient:
        """This client, sending ``token`` (None: no token) instead of its own.

        The copy shares the channels (one connection per daemon for every caller: e.g. a
        server that passes each of its callers' tokens through) and the fleet's down marks;
        closing either closes both.
        """
        other = copy.copy(self)
        other._metadata = _metadata(token)
        return other

    async def _call(
        self,
        rpc: str,
        request: Any,
        *,
        idempotent: bool,
        timeout: float | None,
        again: bool = True,
    ) -> Any:
        method = attrgetter(rpc)
        delay, attempt = 0.05, 0
        while True:
            try:
                return await self._route(method, request, idempotent, timeout or self.timeout)
            except MemorydError as error:
                wait = _backoff(error, attempt, self.retries, idempotent and again, delay)
            await asyncio.sleep(wait)
            delay, attempt = delay * 4, attempt + 1

    async def _route(self, method: Any, request: Any, idempotent: bool, timeout: float) -> Any:
        """As ``MemoryClient._route``."""
        if self._fleet is None:
            try:
                return await method(self._endpoints[0])(
                    request, timeout=timeout, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as e:
                raise error_from_rpc(e) from None
        failed: MemorydError | None = None
        for i in self._fleet.order(request.agent_id):
            endpoint = self._endpoints[i]
            assert isinstance(endpoint, _AsyncEndpoint)
            if not await endpoint.connect(self.connect_timeout):
                self._fleet.mark_down(i)  # nothing was sent: any call may go on
                failed = _no_connection(endpoint, self.connect_timeout)
                continue
            try:
                response = await method(endpoint)(request, timeout=timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                error = error_from_rpc(e)
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise error from None
                self._fleet.mark_down(i)
                if not idempotent:  # it may have reached the daemon: never sent again
                    raise error from None
                failed = error
                continue
            self._fleet.mark_up(i)
            return response
        assert failed is not None
        raise failed

    async def _pick(self, agent_id: str) -> _Endpoint:
        """The daemon for a streaming call (never sent again once it starts)."""
        if self._fleet is None:
            return self._endpoints[0]
        for i in self._fleet.order(agent_id):
            endpoint = self._endpoints[i]
            assert isinstance(endpoint, _AsyncEndpoint)
            if await endpoint.connect(self.connect_timeout):
                return endpoint
            self._fleet.mark_down(i)
        raise _no_connection(endpoint, self.connect_timeout)

    async def store(
        self, agent_id: str, text: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.StoreResponse:
        req = store_request(agent_id, text, **kw)
        req.idempotency_key = self._keyed(req.idempotency_key)
        return await self._call(
            "memory.Store", req, idempotent=bool(req.idempotency_key), timeout=timeout
        )

    async def recall(
        self, agent_id: str, query: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.RecallResponse:
        return await self._call(
            "memory.Recall",
            recall_request(agent_id, query, **kw),
            idempotent=True,
            timeout=timeout,
        )

    async def forget(
        self, agent_id: str, *, id: str = "", query: str = "", timeout: float | None = None
    ) -> pb.ForgetResponse:
        return await self._call(
            "memory.Forget",
            forget_request(agent_id, id=id, query=query),
            idempotent=False,
            timeout=timeout,
        )

    async def update(
        self, agent_id: str, id: str, *, timeout: float | None = None, **kw: Any
    ) -> pb.UpdateResponse:
        return await self._call(
            "memory.Update", update_request(agent_id, id, **kw), idempotent=False, timeout=timeout
        )

    async def get(self, agent_id: str, id: str, *, timeout: float | None = None) -> pb.Memory:
        resp = await self._call(
            "memory.Get",
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
            "memory.List", list_request(agent_id, **kw), idempotent=True, timeout=timeout
        )

    async def review_prepare(
        self, request: review_pb.PrepareReviewRequest, *, timeout: float | None = None
    ) -> review_pb.PrepareReviewResponse:
        return await self._call("review.Prepare", request, idempotent=True, timeout=timeout)

    async def review_apply(
        self, request: review_pb.ApplyReviewRequest, *, timeout: float | None = None
    ) -> review_pb.ApplyReviewResponse:
        return await self._call("review.Apply", request, idempotent=True, timeout=timeout)

    async def stats(
        self, agent_id: str, *, daemon_wide: bool = False, timeout: float | None = None
    ) -> pb.StatsResponse:
        request = pb.StatsRequest(agent_id=agent_id, daemon_wide=daemon_wide)
        return await self._call("memory.Stats", request, idempotent=True, timeout=timeout)

    async def build_context(
        self, agent_id: str, prompt: str, *, timeout: float | None = None, **kw: Any
    ) -> hooks_pb.BuildContextResponse:
        req = build_context_request(agent_id, prompt, **kw)
        return await self._call(
            "hooks.BuildContext", req, idempotent=True, timeout=timeout, again=False
        )

    async def capture(
        self,
        agent_id: str,
        messages: Iterable[hooks_pb.ChatMessage | tuple[str, str]],
        *,
        timeout: float | None = None,
        **kw: Any,
    ) -> hooks_pb.CaptureResponse:
        req = capture_request(agent_id, messages, **kw)
        req.idempotency_key = self._keyed(req.idempotency_key)
        return await self._call(
            "hooks.Capture", req, idempotent=bool(req.idempotency_key), timeout=timeout, again=False
        )

    def stream(
        self,
        requests: AsyncIterator[pb.StreamRequest] | Iterable[pb.StreamRequest],
        *,
        timeout: float | None = None,
        agent_id: str = "",
    ) -> AsyncIterator[pb.StreamResponse]:
        """Open a Stream session: responses arrive as ops finish, matched by request_id.

        Known grpcio issue (grpc/grpc#36066): when the daemon refuses the whole session
        (e.g. UNAUTHENTICATED) while a request is being written, grpcio's asyncio client
        may report ``INTERNAL: Internal error from Core`` instead; the blocking
        ``MemoryClient.stream`` reports the daemon's status. Over a fleet the session goes
        to ``agent_id``'s daemon (the agent whose ops it carries)."""
        if self._fleet is None:
            return _stream_errors(
                self._stub.Stream(requests, timeout=timeout, metadata=self._metadata)
            )
        return self._stream_routed(requests, timeout, agent_id)

    async def _stream_routed(
        self, requests: Any, timeout: float | None, agent_id: str
    ) -> AsyncIterator[pb.StreamResponse]:
        endpoint = await self._pick(agent_id)
        call = endpoint.memory.Stream(requests, timeout=timeout, metadata=self._metadata)
        async for response in _stream_errors(call):
            yield response


async def _stream_errors(call: Any) -> AsyncIterator[pb.StreamResponse]:
    try:
        async for response in call:
            yield response
    except grpc.aio.AioRpcError as e:
        raise error_from_rpc(e) from None
