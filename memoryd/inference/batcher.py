"""Async front of the embedder: micro-batching on dedicated threads, in-flight
de-duplication and an LRU cache of query embeddings.

Concurrent callers' texts are queued; each worker thread takes what is waiting (up to
``max_batch`` queries, or ``doc_batch`` Store texts) and runs one ONNX pass for it, so N
simultaneous requests cost about one model run, and the asyncio event loop never waits on
the model. Identical texts in flight share one computation, and the cache answers a query
asked again: both within one credential's share only (``Key``).

Recall queries go ahead of Store texts: a Recall sits on an agent's turn, and a batch of
documents would otherwise hold it back for tens of milliseconds. But a Store text that
has waited ``doc_max_wait`` (50 ms) goes next whatever is queued, so a steady stream of
Recalls cannot starve Stores (they did before this rule: bench/RESULTS.md, "Hot path,
first pass"), and never twice in a row while queries wait, so a flood of Stores cannot
starve Recalls either ("Fairness after 71109a8"). Runs stay small (4 by default): on a
small CPU short runs gave the most texts per second and long ones far fewer under load
("Embedding model"), and a long run only makes the next query wait longer.

Fair shares: each kind's queue is kept per tenant (``core.principals.TENANT``: the
credential, or the agent when auth is off), and a run takes one text from each tenant in
turn, so a tenant flooding the daemon with 200 Streams fills its own queue, not everyone's
wait. A text whose every caller's deadline (``core.principals.DEADLINE``) has passed is
dropped from the queue, not computed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from memoryd.core import principals, tracing
from memoryd.core.errors import DeadlineExceeded, NotReady, Overloaded
from memoryd.core.jobs import post

log = logging.getLogger(__name__)


Embedding = tuple[np.ndarray, np.ndarray | None]  # pooled vector, token vectors (or None)

# A text's entry in the cache and among the texts in flight: (whose share, text, tokens).
# The share is the calling credential's (``core.principals.sharing``): a tenant's query
# never comes from, nor joins, another tenant's, since the answer that skips the model comes
# back sooner, and so would tell it what another tenant asked (or stored) a moment ago.
Key = tuple[str, str, bool]


QUERY, DOCUMENT = 0, 1

_STOPPED = "the embedder's workers stopped (see the daemon's log); restart the daemon"

# begin_query's longest block for a worker to start on its text (seconds): it takes
# ~0.05 ms (bench/handoff.py); past this the caller goes on without it.
HANDOVER_WAIT = 0.002


class BatchModel(Protocol):
    """What a worker thread runs: ``onnx_embedder.OnnxEmbedder`` or
    ``use_embedder.UseEmbedder`` (synchronous, one instance per worker)."""

    @property
    def name(self) -> str: ...

    dim: int

    def embed_full(
        self,
        texts: list[str],
        *,
        tokens: bool = True,
        started: Callable[[], None] | None = None,
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``started``, when given, is called once the texts are ready for the model and
        before it runs (the point from which the model no longer needs the GIL)."""
        ...


@dataclass(slots=True)
class _Job:
    text: str
    tokens: bool
    future: asyncio.Future[Embedding]
    loop: asyncio.AbstractEventLoop
    queued_at: float = 0.0
    deadline: float | None = None  # monotonic; None = someone waits without a deadline
    share: str = ""  # whose texts it may be shared with (``Key``)
    # Set when the model starts on the job, for a caller that waits for that (begin_query)
    started: threading.Event | None = None


class PendingQuery:
    """A query embedding asked for with ``begin_query``: ``ready`` when it came from the
    cache; await it for the vector and token vectors (or None without tokens)."""

    __slots__ = ("_embedder", "_future", "_key", "_value")

    def __init__(
        self,
        embedder: BatchingEmbedder,
        key: Key,
        future: asyncio.Future[Embedding] | None,
        value: Embedding | None,
    ):
        self._embedder, self._key, self._future, self._value = embedder, key, future, value

    @property
    def ready(self) -> bool:
        return self._value is not None

    def __await__(self) -> Generator[Any, None, Embedding]:
        if self._value is None:
            assert self._future is not None
            # shield: a cancelled caller must not cancel a computation others share.
            self._value = yield from asyncio.shield(self._future).__await__()
            self._embedder._cache.put(self._key, self._value)
        return self._value


class _FairQueue:
    """Jobs per tenant; ``take`` serves tenants in turn, one job each per turn."""

    def __init__(self) -> None:
        self._by_tenant: OrderedDict[str, deque[_Job]] = OrderedDict()
        self.size = 0

    def __bool__(self) -> bool:
        return self.size > 0

    def put(self, tenant: str, job: _Job) -> None:
        queue = self._by_tenant.get(tenant)
        if queue is None:
            queue = self._by_tenant[tenant] = deque()
        queue.append(job)
        self.size += 1

    def oldest(self) -> float:
        return min(q[0].queued_at for q in self._by_tenant.values())

    def take(self, limit: int, now: float) -> tuple[list[_Job], list[_Job]]:
        """Up to ``limit`` jobs, tenants in turn; and the jobs dropped as expired."""
        taken: list[_Job] = []
        expired: list[_Job] = []
        while len(taken) < limit and self._by_tenant:
            tenant, queue = next(iter(self._by_tenant.items()))
            job = queue.popleft()
            self.size -= 1
            if queue:
                self._by_tenant.move_to_end(tenant)
            else:
                del self._by_tenant[tenant]
            if job.deadline is not None and job.deadline <= now:
                expired.append(job)
            else:
                taken.append(job)
        return taken, expired


class _LRU:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._data: OrderedDict[Key, Embedding] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: Key) -> Embedding | None:
        value = self._data.get(key)
        if value is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: Key, value: Embedding) -> None:
        if self.capacity <= 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)


class BatchingEmbedder:
    """Implements ``core.protocols.Embedder`` over one or more workers (``BatchModel``)."""

    def __init__(
        self,
        factory: Callable[[], BatchModel],
        *,
        workers: int = 1,
        max_batch: int = 4,
        doc_batch: int = 4,
        doc_max_wait: float = 0.05,
        cache_size: int = 10_000,
        max_queue: int = 10_000,
    ):
        self._factory = factory
        self._workers_n = workers
        self.max_batch = max_batch
        self.doc_batch = max(1, doc_batch)
        # Queries go first, but a Store text that has waited doc_max_wait seconds goes next
        # whatever is queued: under a stream of Recalls, Stores still move.
        self.doc_max_wait = doc_max_wait
        # Worker 0 waits on a condition of its own (the same lock): a query wakes it alone
        # when it waits, not every worker to find the query is not theirs (the second
        # worker's futile wake cost a query ~0.06 ms here: bench/RESULTS.md, "Hot path,
        # fifth pass"); Store texts wake another worker first.
        lock = threading.RLock()
        self._cond = threading.Condition(lock)  # the other workers wait here
        self._cond_first = threading.Condition(lock)  # worker 0 waits here
        self._first_waiting = False
        self._others_waiting = 0
        self._queries = _FairQueue()
        self._docs = _FairQueue()
        self._docs_last = False  # the last run taken was of Store texts
        self._first_running = False  # worker 0 is in a model run: others take queries
        self._stopping = False
        self._max_queue = max_queue
        self._cache = _LRU(cache_size)
        self._inflight: dict[Key, _Job] = {}
        self._threads: list[threading.Thread] = []
        self._gone: set[int] = set()  # workers whose thread ended (``_exited``)
        self._holding: dict[int, list[_Job]] = {}  # each worker's jobs until answered
        self._model_name = ""
        self.dim = 0
        self.batches = 0
        self.batched_texts = 0

    @property
    def model_name(self) -> str:
        return self._model_name

    def start(self) -> None:
        """Load the models (blocking: call from a thread or before serving)."""
        models = [self._factory() for _ in range(self._workers_n)]
        self._gone.clear()
        self._model_name, self.dim = models[0].name, models[0].dim
        for i, model in enumerate(models):
            t = threading.Thread(
                target=self._run, args=(model, i), name=f"memoryd-embed-{i}", daemon=True
            )
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            self._cond_first.notify_all()
        for t in self._threads:
            t.join(timeout=10)
        self._threads.clear()

    def cache_stats(self) -> tuple[int, int]:
        return self._cache.hits, self._cache.misses

    async def embed_query(self, text: str) -> np.ndarray:
        """One query vector; cached."""
        return (await self._cached(text, tokens=False))[0]

    async def embed_query_with_tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """A query vector and its token vectors (late interaction); cached."""
        vector, tokens = await self._cached(text, tokens=True)
        assert tokens is not None
        return vector, tokens

    async def embed_document(self, text: str) -> np.ndarray:
        """A document vector (documents are not cached: each is usually seen once)."""
        return (await asyncio.shield(self._submit(text, tokens=False, priority=DOCUMENT)))[0]

    async def embed_document_with_tokens(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        vector, tokens = await asyncio.shield(self._submit(text, tokens=True, priority=DOCUMENT))
        assert tokens is not None
        return vector, tokens

    async def _cached(self, text: str, *, tokens: bool) -> Embedding:
        return await self.begin_query(text, tokens=tokens, wait_for_model=0.0)

    def begin_query(
        self, text: str, *, tokens: bool, wait_for_model: float = HANDOVER_WAIT
    ) -> PendingQuery:
        """A query's embedding, from the cache or submitted to the model now, so that the
        caller can do other work (its query's text analysis) while the model runs.

        When the text goes to a worker that waits, this blocks until that worker has the
        text ready for the model, at most ``wait_for_model`` seconds (the worker's ~0.05
        ms from wake-up to the model's run): the caller's own work then runs beside the
        model, not beside the worker's Python steps before it, which it would hold back
        by holding the GIL."""
        key = (principals.sharing(), text, tokens)
        hit = self._cache.get(key)
        tracing.note("cache_hit", hit is not None)
        if hit is not None:
            return PendingQuery(self, key, None, hit)
        future = self._submit(text, tokens=tokens, priority=QUERY, started=wait_for_model > 0.0)
        job = self._inflight.get(key)
        if job is not None and job.started is not None and job.future is future:
            job.started.wait(wait_for_model)
        return PendingQuery(self, key, future, None)

    def _submit(
        self, text: str, *, tokens: bool, priority: int, started: bool = False
    ) -> asyncio.Future[Embedding]:
        if not self._threads:
            raise NotReady("the embedder is not loaded yet")
        if not self.alive():  # (and not a text's job shared below)
            raise NotReady(_STOPPED)
        key = (principals.sharing(), text, tokens)
        deadline = principals.DEADLINE.get()
        loop = asyncio.get_running_loop()
        pending = self._inflight.get(key)
        # Shared only with a caller on the same loop: another loop cannot await its future
        # (and a closed one's never resolves: its answer was dropped, ``_run``).
        if pending is not None and pending.loop is loop:
            with self._cond:  # the text is computed for whoever waits longest
                if pending.deadline is not None:
                    pending.deadline = None if deadline is None else max(deadline, pending.deadline)
            return pending.future
        if self._queries.size + self._docs.size >= self._max_queue:
            raise Overloaded("embedding queue is full; retry later", retry_after=0.5)
        future: asyncio.Future[Embedding] = loop.create_future()
        job = _Job(text, tokens, future, loop, time.monotonic(), deadline, share=key[0])
        self._inflight[key] = job
        future.add_done_callback(lambda _f: self._done(key, job))
        with self._cond:
            if not self.alive():  # (under the lock: the last worker's exit fails the queue)
                self._done(key, job)
                raise NotReady(_STOPPED)
            (self._queries if priority == QUERY else self._docs).put(principals.TENANT.get(), job)
            if priority == QUERY:
                if self._first_waiting:  # worker 0 takes it (_takes)
                    if started and not self._docs:  # it starts at once: worth waiting for
                        job.started = threading.Event()
                    self._cond_first.notify()
                else:  # worker 0 is in a run (or gone): another takes it
                    self._cond.notify_all()
            elif self._others_waiting:  # Store texts are any worker's: worker 0 last
                self._cond.notify()
            else:
                self._cond_first.notify()
        return future

    def _done(self, key: Key, job: _Job) -> None:
        """``job`` is answered (or its answer dropped): no longer shared, unless another
        job has taken its text's place meanwhile."""
        if self._inflight.get(key) is job:
            self._inflight.pop(key, None)

    def _answer(self, job: _Job, callback: Callable[..., None], value: object) -> None:
        """Hand ``job``'s result (or error) to its caller's loop; if that loop has closed,
        the job is no longer shared (``_done`` would never run there)."""
        if not post(job.loop, callback, job.future, value):
            self._done((job.share, job.text, job.tokens), job)

    def _takes(self, worker: int) -> bool:
        """Whether ``worker`` takes a run now. Queries go to worker 0 whenever it is
        waiting, so one gateway's turns meet the same session, whose weights the last
        query used (1-2% quicker than alternating sessions: bench/RESULTS.md, "which
        worker runs a query"); another worker takes them only while worker 0 is in a run
        (a Store batch, another query), and Store texts any.
        Worker 0 leaves a run before its results are handed back, so the query a result
        lets its caller send next is worker 0's."""
        if self._docs:
            return True
        if not self._queries:
            return False
        return worker == 0 or self._first_running or self._stopping or not self._first_alive()

    def _first_alive(self) -> bool:
        """Worker 0's thread runs (were it ever to die, the others take its queries)."""
        return bool(self._threads) and 0 not in self._gone

    def _next_run(self, worker: int) -> list[_Job] | None:
        """The next run's jobs, one kind per run (a query never waits behind a batch of
        documents); None once closing with nothing left."""
        with self._cond:
            while not self._takes(worker):
                if self._stopping and not self._queries and not self._docs:
                    return None
                self._wait(worker)
            now = time.monotonic()
            # A Store text that waited doc_max_wait goes next, but never twice in a row
            # while queries wait: under a backlog of Stores the oldest has always waited
            # that long, and queries (every tenant's Recall) would wait for the whole
            # backlog (bench/RESULTS.md, "fairness: short runs while building the scenario").
            docs_due = bool(self._docs) and (
                not self._queries
                # worker 0's while it serves: another takes them only when it is in a run
                or (
                    worker != 0
                    and not self._first_running
                    and not self._stopping
                    and self._first_alive()
                )
                or (now - self._docs.oldest() >= self.doc_max_wait and not self._docs_last)
            )
            source, limit = (
                (self._docs, self.doc_batch) if docs_due else (self._queries, self.max_batch)
            )
            self._docs_last = docs_due
            jobs, expired = source.take(limit, now)
            self._holding[worker] = jobs + expired  # off the queue: answered by this worker
            if worker == 0:
                self._first_running = bool(jobs)
                if jobs and self._queries:  # left for a worker that declined them
                    self._cond.notify_all()
            if jobs and docs_due and self._docs:
                # More Store texts than this run takes: one more worker for them (a burst
                # submitted in one go woke one worker: the notices after the first found
                # that worker still counted as waiting; helper-60's review)
                if self._others_waiting:
                    self._cond.notify()
                else:
                    self._cond_first.notify()
        for j in expired:
            self._answer(
                j,
                _set_exception,
                DeadlineExceeded("the call's deadline passed while its text waited for the model"),
            )
        return jobs

    def _wait(self, worker: int) -> None:
        """Wait (the lock held) to be woken: worker 0 on its own condition."""
        if worker == 0:
            self._first_waiting = True
            try:
                self._cond_first.wait()
            finally:
                self._first_waiting = False
        else:
            self._others_waiting += 1
            try:
                self._cond.wait()
            finally:
                self._others_waiting -= 1

    def alive(self) -> bool:
        """Whether a worker can run the model (started, not closed, not every thread ended)."""
        return self.live_workers() > 0

    def live_workers(self) -> int:
        """Worker threads serving (0 before start, after close, or once all have ended)."""
        return max(0, len(self._threads) - len(self._gone))

    def _run(self, model: BatchModel, worker: int) -> None:
        try:
            self._serve(model, worker)
        except BaseException:  # a fault here, not the model's (_serve answers those)
            log.critical("embedding worker %d failed", worker, exc_info=True)
        finally:
            self._exited(worker)

    def _exited(self, worker: int) -> None:
        """A worker's thread ends: on close, or by a fault in this module (its model's
        errors are answered, ``_serve``). When the last one ends outside close, nothing
        would ever answer the texts queued, nor those submitted later: they fail now
        (``_submit`` refuses new ones, and the server's health turns NOT_SERVING)."""
        with self._cond:
            self._gone.add(worker)
            held = self._holding.pop(worker, [])  # taken, maybe not all answered
            others = len(self._threads) - len(self._gone)
            if not self._stopping:
                log.critical("embedding worker %d stopped; %d left", worker, others)
            queued: list[_Job] = []
            if others:  # worker 0's queries are theirs now (_takes); and a text whose
                # notice woke this worker alone is another's
                self._cond.notify_all()
                self._cond_first.notify_all()
            elif not self._stopping:
                queued = self._queries.take(self._queries.size, 0.0)[0]
                queued += self._docs.take(self._docs.size, 0.0)[0]
        for j in held:  # (an answered future keeps its answer: _set_exception)
            self._answer(j, _set_exception, NotReady("an embedding worker stopped; retry"))
        for j in queued:
            self._answer(j, _set_exception, NotReady(_STOPPED))

    def _serve(self, model: BatchModel, worker: int) -> None:
        while True:
            jobs = self._next_run(worker)
            if jobs is None:
                return
            if not jobs:  # every job taken had expired (and is answered)
                self._holding.pop(worker, None)
                continue
            try:
                want_tokens = any(j.tokens for j in jobs)
                events = [j.started for j in jobs if j.started is not None]
                if events:
                    try:
                        vectors, token_vectors = model.embed_full(
                            [j.text for j in jobs], tokens=want_tokens, started=_setter(events)
                        )
                    finally:
                        _setter(events)()
                else:
                    vectors, token_vectors = model.embed_full(
                        [j.text for j in jobs], tokens=want_tokens
                    )
            except BaseException as e:  # the model failed: fail these requests, keep serving
                # (whatever it raised: SystemExit or a BaseException of its own from the
                # model's code would otherwise end the thread, and its texts' callers
                # would wait for ever)
                self._left_run(worker)
                log.exception("embedding batch of %d failed", len(jobs))
                error = (
                    e
                    if isinstance(e, Exception)
                    else RuntimeError(f"the model's run ended with {type(e).__name__}: {e}")
                )
                for j in jobs:
                    self._answer(j, _set_exception, error)
                self._holding.pop(worker, None)
                continue
            self._left_run(worker)
            self.batches += 1
            self.batched_texts += len(jobs)
            for i, j in enumerate(jobs):
                result = (vectors[i], token_vectors[i] if j.tokens else None)
                self._answer(j, _set_result, result)
            self._holding.pop(worker, None)

    def _left_run(self, worker: int) -> None:
        """Worker 0 is out of its run (before its results go back): queries are its own."""
        if worker == 0:
            with self._cond:
                self._first_running = False


def _setter(events: list[threading.Event]) -> Callable[[], None]:
    def started() -> None:
        for event in events:
            event.set()

    return started


def _set_result(future: asyncio.Future[Embedding], value: Embedding) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Embedding], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
