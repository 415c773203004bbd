"""gRPC servicer of ``memoryd.v1.MemoryService``: validate, delegate, convert.

Servicers raise domain errors; ``api.errors`` maps them. The Stream RPC runs each op as
its own task (up to ``max_in_flight`` at once, then it stops reading: backpressure) and
answers each by ``request_id``; a failing op yields an ``Error`` for that op only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from memoryd import __version__
from memoryd._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd._gen.memoryd.v1 import hooks_pb2_grpc as hooks_grpc
from memoryd._gen.memoryd.v1 import memory_pb2 as pb
from memoryd._gen.memoryd.v1 import memory_pb2_grpc as pb_grpc
from memoryd.api import convert
from memoryd.api.errors import status_of
from memoryd.core.errors import InvalidArgument, NotReady
from memoryd.core.hooks import HookService
from memoryd.core.service import MemoryService


class MemoryServicer(pb_grpc.MemoryServiceServicer):
    def __init__(self, max_in_flight: int = 64):
        self._service: MemoryService | None = None
        self._started = time.monotonic()
        self._max_in_flight = max_in_flight

    def set_service(self, service: MemoryService) -> None:
        self._service = service

    @property
    def service(self) -> MemoryService:
        if self._service is None:
            raise NotReady("memoryd is starting (loading models and the index); retry shortly")
        return self._service

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
        return convert.stats_response(stats, time.monotonic() - self._started, __version__)

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
        async for req in request_iterator:
            try:
                done = await self.service.import_memory(
                    req.agent_id, convert.memory_from_pb(req.memory)
                )
            except Exception as error:
                code, message = status_of(error)
                errors.append(
                    pb.Error(
                        code=code.value[0],
                        code_name=code.name,
                        message=f"memory {req.memory.id}: {message}",
                    )
                )
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

        async def read() -> None:
            try:
                async for req in request_iterator:
                    await slots.acquire()
                    task = asyncio.create_task(run_op(req))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                while tasks:
                    await asyncio.gather(*list(tasks), return_exceptions=True)
            finally:
                out.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (response := await out.get()) is not None:
                yield response
            await reader  # surfaces a broken request stream as the RPC's status
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()

    async def _one_op(self, req: pb.StreamRequest) -> pb.StreamResponse:
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
            code, message = status_of(error)
            err = pb.Error(code=code.value[0], code_name=code.name, message=message)
            return pb.StreamResponse(request_id=rid, error=err)

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


class HookServicer(hooks_grpc.HookServiceServicer):
    """``memoryd.v1.HookService``: the gateway's before-prompt and after-turn hooks."""

    def __init__(self) -> None:
        self._hooks: HookService | None = None

    def set_service(self, hooks: HookService) -> None:
        self._hooks = hooks

    @property
    def hooks(self) -> HookService:
        if self._hooks is None:
            raise NotReady("memoryd is starting (loading models and the index); retry shortly")
        return self._hooks

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
        )
        return convert.capture_response(result)
