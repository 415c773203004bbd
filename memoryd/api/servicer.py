"""gRPC servicer of ``memoryd.v1.MemoryService``: validate, delegate, convert.

Servicers raise domain errors; ``api.errors`` maps them. The Stream RPC runs each op as
its own task (up to ``max_in_flight`` at once, then it stops reading: backpressure) and
answers each by ``request_id``; a failing op yields an ``Error`` for that op only, and so
does a frame that does not decode (see ``api.decoding``): INVALID_ARGUMENT, with the
frame's request_id when it can still be read from the bytes, else an empty one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hooks_grpc
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc as pb_grpc
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client._gen.memoryd.v1 import review_pb2_grpc as review_grpc

from memoryd import __version__
from memoryd.api import convert
from memoryd.api.decoding import Undecodable
from memoryd.api.errors import status_of
from memoryd.core import principals
from memoryd.core.errors import InvalidArgument, NotReady
from memoryd.core.hooks import HookService
from memoryd.core.records import FollowLag
from memoryd.core.review import ReviewService
from memoryd.core.service import MemoryService

T = TypeVar("T")


def _ready(service: T | None) -> T:
    """The service a servicer delegates to; NotReady until the root has set it."""
    if service is None:
        raise NotReady("memoryd is starting (loading models and the index); retry shortly")
    return service


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    # Client streams whose frames that do not decode are answered here, one by one.
    ANSWERS_UNDECODABLE_FRAMES = frozenset(
        f"/{pb.DESCRIPTOR.services_by_name['MemoryService'].full_name}/{name}"
        for name in ("Stream", "Import")
    )

    def __init__(self, max_in_flight: int = 64):
        self._service: MemoryService | None = None
        self._started = time.monotonic()
        self._max_in_flight = max_in_flight
        self._storage_status: Callable[[], str] = lambda: "ok"
        self._follow_lag: Callable[[], FollowLag] | None = None
        # Set at SIGTERM: open Streams stop reading new ops (the readers below are cancelled),
        # finish the ops already started, then end UNAVAILABLE.
        self._draining = False
        self._stream_readers: set[asyncio.Task[None]] = set()

    def set_service(
        self,
        service: MemoryService,
        storage_status: Callable[[], str] | None = None,
        follow_lag: Callable[[], FollowLag] | None = None,
    ) -> None:
        self._service = service
        if storage_status is not None:
            self._storage_status = storage_status
        self._follow_lag = follow_lag

    def begin_drain(self) -> None:
        """Shutdown: no Stream reads another op; ops already started run to the end."""
        self._draining = True
        for reader in list(self._stream_readers):
            reader.cancel()

    @property
    def service(self) -> MemoryService:
        return _ready(self._service)

    async def Store(self, request: pb.StoreRequest, context: Any) -> pb.StoreResponse:
        return await self._store(request)

    async def Recall(self, request: pb.RecallRequest, context: Any) -> pb.RecallResponse:
        return await self._recall(request)

    async def Forget(self, request: pb.ForgetRequest, context: Any) -> pb.ForgetResponse:
        return await self._forget(request)

    async def Update(self, request: pb.UpdateRequest, context: Any) -> pb.UpdateResponse:
        return await self._update(request)

    async def Get(self, request: pb.GetRequest, context: Any) -> pb.GetResponse:
        memory = self.service.get(request.agent_id, request.id)
        return pb.GetResponse(memory=convert.memory_to_pb(memory))

    async def List(self, request: pb.ListRequest, context: Any) -> pb.ListResponse:
        page = self.service.list(
            request.agent_id,
            page_size=request.page_size,
            page_token=request.page_token,
            scopes=tuple(request.scopes),
            categories=convert.categories(request.categories),
            oldest_first=request.oldest_first,
        )
        return convert.list_response(page)

    async def Stats(self, request: pb.StatsRequest, context: Any) -> pb.StatsResponse:
        stats = self.service.stats(request.agent_id, daemon_wide=request.daemon_wide)
        response = convert.stats_response(stats, time.monotonic() - self._started, __version__)
        response.storage_status = self._storage_status()
        if self._follow_lag is not None:
            convert.set_follow_lag(response, self._follow_lag())
        return response

    async def ListConflicts(
        self, request: pb.ListConflictsRequest, context: Any
    ) -> pb.ListConflictsResponse:
        items = self.service.list_conflicts(request.agent_id, request.limit)
        return convert.conflicts_response(items)

    async def Export(self, request: pb.ExportRequest, context: Any) -> AsyncIterator[pb.Memory]:
        memories = self.service.export(
            request.agent_id, tuple(request.scopes), all_scopes=request.all_scopes
        )
        for memory in memories:
            yield convert.memory_to_pb(memory)

    async def Import(
        self, request_iterator: AsyncIterator[pb.ImportRequest], context: Any
    ) -> pb.ImportResponse:
        """Each memory stands alone: a refused one is reported, the others are imported."""
        imported = skipped = 0
        errors: list[pb.Error] = []
        frame = 0
        async for req in request_iterator:
            frame += 1
            if isinstance(req, Undecodable):
                errors.append(_error(InvalidArgument(req.message), f"frame {frame}: "))
                continue
            principals.recheck()  # (a revoked key ends the call: its rows so far stand)
            try:
                done = await self.service.import_memory(
                    req.agent_id, convert.memory_from_pb(req.memory)
                )
            except Exception as error:
                errors.append(_error(error, f"memory {req.memory.id}: "))
                continue
            if done:
                imported += 1
            else:
                skipped += 1
        return pb.ImportResponse(imported=imported, skipped_existing=skipped, errors=errors)

    async def Stream(
        self, request_iterator: AsyncIterator[pb.StreamRequest], context: Any
    ) -> AsyncIterator[pb.StreamResponse]:
        out: asyncio.Queue[pb.StreamResponse | None] = asyncio.Queue()
        slots = asyncio.Semaphore(self._max_in_flight)
        tasks: set[asyncio.Task[None]] = set()

        async def run_op(req: pb.StreamRequest) -> None:
            try:
                out.put_nowait(await self._one_op(req))
            finally:
                slots.release()

        async def read_ops() -> None:
            async for req in request_iterator:
                await slots.acquire()
                try:
                    principals.recheck()  # the keys may have changed while it waited
                except BaseException:
                    slots.release()
                    raise
                task = asyncio.create_task(run_op(req))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        cut = False  # set when shutdown stopped the reading

        async def read() -> None:
            nonlocal cut
            frames = asyncio.create_task(read_ops())
            self._stream_readers.add(frames)
            broken: Exception | None = None
            try:
                if self._draining:
                    frames.cancel()
                try:
                    await frames
                except asyncio.CancelledError:
                    if not self._draining:
                        raise
                    cut = True
                except Exception as e:  # the request stream broke (or its key was revoked)
                    broken = e  # the ops taken before it are still answered, then it ends
                while tasks:
                    await asyncio.gather(*list(tasks), return_exceptions=True)
                if broken is not None:
                    raise broken
            finally:
                self._stream_readers.discard(frames)
                frames.cancel()
                out.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (response := await out.get()) is not None:
                yield response
            await reader  # surfaces a broken request stream as the RPC's status
            if cut:
                raise NotReady(
                    "memoryd is shutting down: every op answered above was run, none sent "
                    "after them was; send those to another daemon or after the restart"
                )
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()

    async def _one_op(self, req: pb.StreamRequest | Undecodable) -> pb.StreamResponse:
        if isinstance(req, Undecodable):
            # That frame's own error. Its request_id is read from the raw bytes when it
            # leads the frame (as every serializer writes it), else it is empty.
            error = _error(InvalidArgument(req.message))
            return pb.StreamResponse(request_id=req.leading_string(), error=error)
        rid = req.request_id
        try:
            kind = req.WhichOneof("op")
            if kind == "store":
                return pb.StreamResponse(request_id=rid, store=await self._store(req.store))
            if kind == "recall":
                return pb.StreamResponse(request_id=rid, recall=await self._recall(req.recall))
            if kind == "forget":
                return pb.StreamResponse(request_id=rid, forget=await self._forget(req.forget))
            if kind == "update":
                return pb.StreamResponse(request_id=rid, update=await self._update(req.update))
            raise InvalidArgument(
                "StreamRequest carries no op: set store, recall, forget or update"
            )
        except Exception as error:
            return pb.StreamResponse(request_id=rid, error=_error(error))

    async def _store(self, request: pb.StoreRequest) -> pb.StoreResponse:
        result = await self.service.store_memory(convert.store_request(request))
        return convert.store_response(result)

    async def _recall(self, request: pb.RecallRequest) -> pb.RecallResponse:
        results = await self.service.recall(convert.recall_request(request))
        return convert.recall_response(results, full_text=request.full_text)

    async def _forget(self, request: pb.ForgetRequest) -> pb.ForgetResponse:
        target = request.WhichOneof("target")
        if target == "id":
            result = await self.service.forget_id(request.agent_id, request.id)
        elif target == "query":
            result = await self.service.forget_query(request.agent_id, request.query)
        else:
            raise InvalidArgument("ForgetRequest needs a target: set id or query")
        return convert.forget_response(result)

    async def _update(self, request: pb.UpdateRequest) -> pb.UpdateResponse:
        memory = await self.service.update(convert.update_request(request))
        return pb.UpdateResponse(memory=convert.memory_to_pb(memory))


def _error(error: BaseException, prefix: str = "") -> pb.Error:
    """One op's (or one imported memory's) error, mapped like an RPC's status."""
    code, message = status_of(error)
    return pb.Error(code=code.value[0], code_name=code.name, message=prefix + message)


class HookServicer(hooks_grpc.HookServiceServicer):
    """``memoryd.v1.HookService``: the gateway's before-prompt and after-turn hooks."""

    def __init__(self) -> None:
        self._hooks: HookService | None = None

    def set_service(self, hooks: HookService) -> None:
        self._hooks = hooks

    @property
    def hooks(self) -> HookService:
        return _ready(self._hooks)

    async def BuildContext(
        self, request: hooks_pb.BuildContextRequest, context: Any
    ) -> hooks_pb.BuildContextResponse:
        result = await self.hooks.build_context(
            request.agent_id,
            request.session_id,
            request.prompt,
            max_results=request.max_results,
            min_score=request.min_score,
            time_budget_ms=request.time_budget_ms,
            scopes=tuple(request.scopes),
            time=convert.context_time(request),
        )
        return convert.context_response(result)

    async def Capture(
        self, request: hooks_pb.CaptureRequest, context: Any
    ) -> hooks_pb.CaptureResponse:
        result = await self.hooks.capture(
            request.agent_id,
            request.session_id,
            [(m.role, m.text) for m in request.messages],
            scope=request.scope,
            idempotency_key=request.idempotency_key,
        )
        return convert.capture_response(result)


class ReviewServicer(review_grpc.ReviewServiceServicer):
    """``memoryd.v1.ReviewService``: review proposals and their approval-gated apply."""

    def __init__(self) -> None:
        self._review: ReviewService | None = None

    def set_service(self, review: ReviewService) -> None:
        self._review = review

    @property
    def review(self) -> ReviewService:
        return _ready(self._review)

    async def Prepare(
        self, request: review_pb.PrepareReviewRequest, context: Any
    ) -> review_pb.PrepareReviewResponse:
        prepared = await self.review.prepare(convert.prepare_review_request(request))
        return convert.prepare_review_response(prepared)

    async def Apply(
        self, request: review_pb.ApplyReviewRequest, context: Any
    ) -> review_pb.ApplyReviewResponse:
        items = convert.apply_review_request(request)
        results = await self.review.apply(request.agent_id, items)
        return convert.apply_review_response(results)


# The full names of the three services, for health and reflection.
SERVICE_NAMES = (
    pb.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    hooks_pb.DESCRIPTOR.services_by_name["HookService"].full_name,
    review_pb.DESCRIPTOR.services_by_name["ReviewService"].full_name,
)


def add_servicers_to_server(
    server: Any, memory: MemoryServicer, hooks: HookServicer, review: ReviewServicer
) -> None:
    """Register the three servicers on a ``grpc.aio`` server (the composition root calls
    this, so that only ``api`` knows the generated modules)."""
    pb_grpc.add_MemoryServiceServicer_to_server(memory, server)
    hooks_grpc.add_HookServiceServicer_to_server(hooks, server)
    review_grpc.add_ReviewServiceServicer_to_server(review, server)
