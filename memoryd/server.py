"""Composition root: builds every concrete piece, wires them, starts and stops the daemon.

Start-up order: bind the port and serve health as NOT_SERVING at once (so probes and
clients get a clear UNAVAILABLE instead of a refused connection), then load the
embedding model, open the store and rebuild the hot index, compile the native kernels,
and only then flip health to SERVING. Shutdown (SIGTERM/SIGINT) stops accepting RPCs,
lets in-flight ones finish within a grace period, then flushes queued writes.

It never reaches inside a component: each owns its background jobs (the repository its
access-count flush and approximate-index maintenance, the store its writer and compactor
threads) and says through a method what Stats, health and metrics need. The daemon's own
periodic jobs (sweeping expired memories, backups, the storage health entry, re-freezing
the heap) run as ``core.jobs.Jobs``, each on its own task, so one that fails never skips
the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import ipaddress
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING
from zoneinfo import ZoneInfo

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from memoryd_native import warm_up

from memoryd.api.auth import AuthInterceptor, KeyRing
from memoryd.api.backup import write_backup
from memoryd.api.decoding import RequestDecodingInterceptor
from memoryd.api.interceptors import ErrorMappingInterceptor
from memoryd.api.limits import LimitsInterceptor, RateLimiter
from memoryd.api.metrics import Metrics, MetricsInterceptor, StateCollector
from memoryd.api.servicer import (
    SERVICE_NAMES,
    HookServicer,
    MemoryServicer,
    ReviewServicer,
    add_servicers_to_server,
)
from memoryd.api.tracing import INSTRUMENTATION, TracingInterceptor, build_provider
from memoryd.config import Settings
from memoryd.core import tracing
from memoryd.core.errors import ConfigError
from memoryd.core.hooks import HookService
from memoryd.core.jobs import Job, Jobs
from memoryd.core.language import warm_up as warm_up_language_detector
from memoryd.core.lifecycle import MergeSettings, TtlSettings
from memoryd.core.protocols import Reranker
from memoryd.core.records import Category
from memoryd.core.retrieval import LateInteractionReranker, Rerank, Retriever
from memoryd.core.review import KEY_FILE as REVIEW_KEY_FILE
from memoryd.core.review import ReviewService, load_or_create_key
from memoryd.core.service import MemoryService, ServiceLimits
from memoryd.inference import use_embedder
from memoryd.inference.batcher import BatchingEmbedder, BatchModel
from memoryd.inference.cross_encoder import CrossEncoderReranker
from memoryd.inference.llm import OpenAICompatibleModel
from memoryd.inference.onnx_embedder import (
    ModelFiles,
    OnnxEmbedder,
    builtin_model_files,
    model_files_from_dir,
)
from memoryd.inference.quantize import QUANTIZED_SUFFIX, default_cache_dir, quantized_model
from memoryd.storage import heap
from memoryd.storage.claims import KeyClaims
from memoryd.storage.conflict_log import JsonlConflictLog
from memoryd.storage.lance_store import (
    KEEP_VERSIONS_SECONDS,
    SHARED_KEEP_VERSIONS_SECONDS,
    LanceStore,
    is_local,
    object_store_options,
)
from memoryd.storage.lease import MaintenanceLease, open_store
from memoryd.storage.lexical import Analyzer
from memoryd.storage.repository import Repository

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("memoryd")

# A health entry of its own for writes: NOT_SERVING while the store refuses them (a full
# disk). "" and the services stay SERVING meanwhile, since reads are still answered.
STORAGE_HEALTH_NAME = "memoryd.storage"
# And one for reads' freshness on a shared store: NOT_SERVING once following the other
# daemons' commits (storage.follow_interval) has failed for FOLLOW_FAILING_LOOKS intervals,
# at least FOLLOW_FAILING_MIN_SECONDS (reads go on, from an index that no longer moves).
# Always SERVING where following is off (a local directory: nothing to follow).
FOLLOW_HEALTH_NAME = "memoryd.follow"
FOLLOW_FAILING_LOOKS = 4
FOLLOW_FAILING_MIN_SECONDS = 2.0
STORAGE_WATCH_SECONDS = 1.0
SWEEP_INTERVAL_SECONDS = 60.0
FREEZE_MIN_OBJECTS = 200_000  # re-freeze the heap only past this many unfrozen objects
# The late-interaction token vectors while serving (token_file.py; reused after a clean
# shutdown when its map, token_map.py, matches the table; else rewritten at start)
TOKEN_FILE = "tokens.bin"


def freeze_heap(*, unless_below: int = 0, frozen_too: bool = True) -> bool:
    """Collect, then move every object alive now out of the cyclic GC's reach; with
    ``unless_below``, only once the objects the GC still walks in full collections
    outnumber both that and the frozen ones. Returns whether it froze.

    The hot index holds millions of long-lived objects (records, postings); a full
    collection walks them all, and under load those pauses stopped the event loop for
    130-290 ms at 20k memories, ~10 ms once frozen (bench/RESULTS.md). Frozen objects are
    still freed by reference counting when dropped, but a reference cycle frozen while
    alive (a call in flight: a LanceDB compaction that then failed) is never collected
    while it stays frozen: so a re-freeze first unfreezes, and its collection takes what
    died since the last freeze (~70 MiB at 100k Stores, bench/RESULTS.md); with
    ``frozen_too`` False it does not, and walks only what was made since the last freeze
    (at least half the heap's objects fewer). The daemon freezes after the load, before
    serving, again each time the heap has doubled since (a few times in a daemon's life,
    not on a timer), and once after a burst of writes (``HeapFreezer``).
    """
    if unless_below:
        walked = len(gc.get_objects(generation=2))
        if walked < max(unless_below, gc.get_freeze_count()):
            return False
    if frozen_too:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    return True


class HeapFreezer:
    """The daemon's re-freezes, one ``tick`` a minute: when the heap has doubled
    (``freeze_heap``), and once more after one of those that ran while the store was busy.
    A re-freeze under a burst of Stores walks only what the burst made (the loop stands
    still for it: a full walk at 100k Stores took 0.9-1.4 s on a slow machine) and freezes
    what is then in flight (requests, the writer's and the compaction's state); the one
    after the burst, at the first tick that finds the store quiet or ``SETTLE_TICKS``
    ticks later under a steady trickle of writes, walks everything and collects what they
    left. A burst too small to double the heap is collected at the first quiet tick after
    it too (only what was made since the last freeze is walked): else the cycles it left
    stayed, as nothing allocates in an idle daemon to start a collection. ``run`` then
    hands the pages it freed back to the system."""

    SETTLE_TICKS = 10  # the longest wait for a quiet tick after a busy re-freeze

    def __init__(
        self,
        writes: Callable[[], int],
        busy: Callable[[], bool] = lambda: False,
        *,
        min_objects: int = FREEZE_MIN_OBJECTS,
    ):
        self._writes = writes  # moves with every write (the store's commits, compactions)
        self._busy = busy  # writes queued or a compaction running
        self._min_objects = min_objects
        self._seen = writes()
        self._settle_in = 0  # ticks left before the full re-freeze a busy one owes (0: none)
        self._collected = self._seen  # the writes counter at the last collection

    def tick(self) -> bool:
        """Re-freeze if due; returns whether it did."""
        writes = self._writes()
        busy = writes != self._seen or self._busy()
        self._seen = writes
        frozen = gc.get_freeze_count()
        started = time.perf_counter()
        if freeze_heap(unless_below=self._min_objects, frozen_too=not busy):
            walked = gc.get_freeze_count()
            if busy:  # walked what was made since the last freeze (and the garbage in it)
                why, walked = "the heap has doubled, writes going on", walked - frozen
                self._settle_in = self._settle_in or self.SETTLE_TICKS
            else:
                why, self._settle_in = "the heap has doubled", 0
        elif self._settle_in and (not busy or self._settle_in == 1):
            freeze_heap()
            why = "the writes have stopped" if not busy else "the writes go on: the full walk owed"
            walked = gc.get_freeze_count()
            self._settle_in = 0
        elif not busy and writes != self._collected:
            # What the writes left in reference cycles (a dropped LanceDB session with its
            # caches: ~66 MiB at 100k Stores) waits for a collection, and an idle daemon
            # allocates nothing that would start one: walk what was made since the freeze.
            freeze_heap(frozen_too=False)
            why, walked = "the writes have stopped: what they left", gc.get_freeze_count() - frozen
        else:
            self._settle_in = max(0, self._settle_in - 1)
            return False
        self._collected = writes
        # the event loop stood still meanwhile: a collection walks every object not frozen
        log.info(
            "heap re-frozen (%s): %d objects, %d walked, in %.0f ms",
            why,
            gc.get_freeze_count(),
            walked,
            (time.perf_counter() - started) * 1000,
        )
        return True

    async def run(self) -> bool:
        """``tick``, then, if it re-froze, ``malloc_trim`` on a thread: what the collection
        freed (a dropped LanceDB session's caches, ~64 MiB at 100k Stores) is native memory
        glibc keeps resident between live chunks until trimmed (bench/RESULTS.md)."""
        if not self.tick():
            return False
        await asyncio.to_thread(heap.release_free_pages)
        return True


def limits_from(settings: Settings) -> ServiceLimits:
    s = settings
    return ServiceLimits(
        max_chars=s.store.max_chars,
        default_importance=s.store.default_importance,
        duplicate_threshold=s.store.duplicate_threshold,
        summary_max_words=s.store.summary_max_words,
        max_metadata_entries=s.store.max_metadata_entries,
        max_metadata_key_chars=s.store.max_metadata_key_chars,
        max_metadata_value_chars=s.store.max_metadata_value_chars,
        max_idempotency_key_chars=s.store.max_idempotency_key_chars,
        recall_default_limit=s.recall.default_limit,
        recall_max_limit=s.recall.max_limit,
        forget_strong_score=s.forget.strong_score,
        forget_candidate_score=s.forget.candidate_score,
        forget_margin=s.forget.margin,
        forget_max_candidates=s.forget.max_candidates,
        list_default_page_size=s.listing.default_page_size,
        list_max_page_size=s.listing.max_page_size,
        reject_injection=s.store.reject_injection,
        merge=MergeSettings(
            policy=s.store.merge_policy,
            band_low=s.store.merge_band_low,
            supersede_categories=frozenset(
                Category.from_label(c) for c in s.store.supersede_categories
            ),
        ),
        summarizer=s.store.summarizer,
        ttl=TtlSettings(
            session=timedelta(hours=s.store.ttl_session_hours),
            short=timedelta(days=s.store.ttl_short_days),
        ),
        token_vectors=s.recall.token_vectors or s.recall.rerank == "late-interaction",
    )


def key_window(settings: Settings) -> timedelta | None:
    """How long a keyed Store that created nothing replays its answer (None: always)."""
    days = settings.store.idempotency_days
    return timedelta(days=days) if days > 0 else None


def embedder_languages(settings: Settings) -> frozenset[str]:
    """The languages the configured embedder was trained on (empty = every language)."""
    e = settings.embedder
    if e.languages is not None:
        return frozenset(e.languages)
    if e.model_dir is not None:
        return frozenset()
    if e.model == use_embedder.MODEL_NAME:
        return frozenset(use_embedder.LANGUAGES)
    return frozenset({"en"})


def embedder_files(settings: Settings) -> ModelFiles:
    """The model the settings name, quantised to int8 when they ask (cached on disk)."""
    e = settings.embedder
    if e.model_dir is not None:
        files = model_files_from_dir(e.model_dir, e.model_name)
    else:
        files = builtin_model_files()
        if e.model_name:
            files = replace(files, name=e.model_name)
    quantize = e.quantize == "int8" or (e.quantize == "auto" and e.model_dir is None)
    if not quantize:
        return files
    model = quantized_model(files.model, e.cache_dir or default_cache_dir())
    name = files.name if e.model_name else f"{files.name}{QUANTIZED_SUFFIX}"
    return ModelFiles(name, model, files.tokenizer)


def build_embedder(settings: Settings) -> BatchingEmbedder:
    e = settings.embedder
    factory: Callable[[], BatchModel]
    if e.model == use_embedder.MODEL_NAME:
        name = e.model_name or use_embedder.MODEL_NAME

        def factory() -> BatchModel:
            return use_embedder.UseEmbedder(
                max_tokens=e.max_tokens, threads=e.intra_op_threads, name=name
            )

    else:
        files = embedder_files(settings)

        def factory() -> BatchModel:
            return OnnxEmbedder(files, max_tokens=e.max_tokens, intra_op_threads=e.intra_op_threads)

    return BatchingEmbedder(
        factory,
        workers=e.workers,
        max_batch=e.max_batch,
        doc_batch=e.doc_batch,
        doc_max_wait=e.doc_max_wait_ms / 1000.0,
        cache_size=e.cache_size,
    )


def build_text_model(settings: Settings) -> OpenAICompatibleModel | None:
    llm = settings.llm
    if not llm.base_url:
        if settings.store.merge_policy == "llm" or settings.store.summarizer == "llm":
            log.warning("store uses the LLM but llm.base_url is empty: falling back")
        return None
    key = llm.api_key.get_secret_value() if llm.api_key is not None else ""
    return OpenAICompatibleModel(llm.base_url, llm.model, api_key=key, timeout=llm.timeout_seconds)


def is_loopback(listen: str) -> bool:
    """Whether HOST:PORT names only this machine (127.0.0.0/8, ::1, localhost)."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere, or 0.0.0.0-style wildcards


def build_keys(settings: Settings) -> KeyRing | None:
    """The credentials the settings name, or None when auth is off. Refuses to start
    (ConfigError) on a weak token or a bad keys file, and when a non-loopback address
    would be served without any credential unless ``server.insecure`` says so."""
    s = settings
    token = s.auth_token.get_secret_value() if s.auth_token is not None else None
    mtls = s.server.tls_client_ca is not None
    if mtls and s.server.tls_cert is None:
        raise ConfigError("server.tls_client_ca needs server.tls_cert and server.tls_key")
    if token is None and s.auth.keys_file is None and not mtls:
        if not is_loopback(s.listen) and not s.server.insecure:
            raise ConfigError(
                f"listen {s.listen} is reachable from other machines and no credential is "
                "configured: set MEMORYD_AUTH_TOKEN or auth.keys_file (or server.tls_client_ca), "
                "or pass --insecure to serve it open"
            )
        return None
    return KeyRing(token, s.auth.keys_file)


class Daemon:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.policy = settings.policy.to_policy()  # validate before binding anything
        self.keys = build_keys(settings)
        self.port = 0
        self.server: grpc.aio.Server | None = None
        self.health = health.aio.HealthServicer()
        self.servicer = MemoryServicer(max_in_flight=settings.server.stream_max_in_flight)
        self.hook_servicer = HookServicer()
        self.review_servicer = ReviewServicer()
        self.embedder: BatchingEmbedder | None = None
        self.cross_encoder: CrossEncoderReranker | None = None
        self.repository: Repository | None = None
        self.service: MemoryService | None = None
        self._lock_file: IO[str] | None = None
        self._jobs = Jobs()
        self._freezer: HeapFreezer | None = None  # made by the first heap-freeze job
        self._keys_watch: asyncio.Task[None] | None = None
        self._storage_serving = True
        self._embedder_serving = True
        self._follow_serving = True
        self.startup_seconds = 0.0
        self.metrics = Metrics()
        self.metrics_port = 0
        self.tracer_provider: TracerProvider | None = None

    async def start(self) -> int:
        started = time.perf_counter()
        s = self.settings
        self._lock_data_dir()
        interceptors: list[grpc.aio.ServerInterceptor] = [
            MetricsInterceptor(self.metrics, access_log=s.auth.access_log),
            ErrorMappingInterceptor(),
        ]
        self.tracer_provider = build_provider(s.tracing)
        if self.tracer_provider is not None:
            tracer = self.tracer_provider.get_tracer(INSTRUMENTATION)
            # Inside metrics (its request id), outside the error mapping (the final code).
            interceptors.insert(1, TracingInterceptor(tracer))
            tracing.install(tracer)
            t = s.tracing
            log.info("tracing: %s exporter, sample ratio %g", t.exporter, t.sample_ratio)
        if self.keys is not None:
            interceptors.append(AuthInterceptor(self.keys))
            self._keys_watch = asyncio.create_task(self.keys.watch())
        limits = s.limits.to_limits()
        interceptors.append(LimitsInterceptor(RateLimiter(limits) if limits.enabled else None))
        # Innermost, so that auth refuses a call before its body is judged (api.decoding).
        interceptors.append(
            RequestDecodingInterceptor(answers_frames=MemoryServicer.ANSWERS_UNDECODABLE_FRAMES)
        )
        server = grpc.aio.server(
            interceptors=interceptors,
            maximum_concurrent_rpcs=s.server.max_concurrent_rpcs,
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.max_allowed_incoming_connections", s.server.max_connections),
                ("grpc.max_concurrent_streams", s.server.max_streams_per_connection),
                ("grpc.max_connection_idle_ms", int(s.server.connection_idle_seconds * 1000)),
            ],
        )
        add_servicers_to_server(server, self.servicer, self.hook_servicer, self.review_servicer)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (
                *SERVICE_NAMES,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        self.port = self._bind(server)
        await self.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        for name in (*SERVICE_NAMES, STORAGE_HEALTH_NAME, FOLLOW_HEALTH_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        await server.start()
        self.server = server
        log.info("listening on %s (port %d); loading", s.listen, self.port)

        await asyncio.to_thread(self._load)
        freeze_heap()
        assert self.repository is not None and self.embedder is not None
        rerankers: dict[Rerank, Reranker] = {
            Rerank.LATE_INTERACTION: LateInteractionReranker(self.repository, self.embedder)
        }
        if self.cross_encoder is not None:
            rerankers[Rerank.CROSS_ENCODER] = self.cross_encoder
        retriever = Retriever(
            self.repository,
            s.recall.to_config(),
            rerankers,
            dense_languages=embedder_languages(s),
            timezone=ZoneInfo(s.recall.timezone),
            detect_language=self.repository.analyzer.detect,
        )
        self.service = MemoryService(
            self.repository,
            self.embedder,
            self.policy,
            limits_from(s),
            retriever=retriever,
            conflicts=JsonlConflictLog(s.data_dir / "conflicts.jsonl"),
            text_model=build_text_model(s),
        )
        self.servicer.set_service(
            self.service,
            storage_status=self.repository.status,
            follow_lag=self.repository.follow_lag,
        )
        self.hook_servicer.set_service(HookService(self.service, s.hooks.to_settings()))
        self.review_servicer.set_service(
            ReviewService(
                self.service,
                s.review.to_settings(s.store.merge_band_low),
                secret=load_or_create_key(Path(s.data_dir) / REVIEW_KEY_FILE),
            )
        )
        self.repository.start_jobs()
        self._jobs = Jobs(self._daemon_jobs())
        self._jobs.start()
        retriever.observe = self.metrics.observe_stage
        self.metrics.add_collector(StateCollector(self._metric_state))
        if s.metrics.listen:
            self.metrics_port = self.metrics.serve(s.metrics.listen)
            host = s.metrics.listen.rpartition(":")[0]
            log.info("metrics on http://%s:%d/metrics", host, self.metrics_port)
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        for name in (*SERVICE_NAMES, STORAGE_HEALTH_NAME, FOLLOW_HEALTH_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self.startup_seconds = time.perf_counter() - started
        log.info("SERVING after %.2fs", self.startup_seconds)
        return self.port

    def _bind(self, server: grpc.aio.Server) -> int:
        s = self.settings.server
        address = self.settings.listen
        if (s.tls_cert is None) != (s.tls_key is None):
            raise ConfigError("server.tls_cert and server.tls_key must be set together")
        try:
            if s.tls_cert is not None and s.tls_key is not None:
                ca = s.tls_client_ca.read_bytes() if s.tls_client_ca is not None else None
                creds = grpc.ssl_server_credentials(
                    [(s.tls_key.read_bytes(), s.tls_cert.read_bytes())],
                    root_certificates=ca,
                    require_client_auth=ca is not None,
                )
                port = server.add_secure_port(address, creds)
            else:
                port = server.add_insecure_port(address)
        except OSError as e:
            raise ConfigError(f"cannot read a TLS file {e.filename}: {e.strerror}") from None
        except RuntimeError:  # grpc: "Failed to bind to address"
            port = 0
        if port == 0:
            raise ConfigError(
                f"listen: cannot bind {address}: the port is in use (another memoryd?) or the "
                "address is not one of this machine's; pick another with --listen HOST:PORT "
                "(port 0 = any free port)"
            )
        return port

    def _lock_data_dir(self) -> None:
        # Also with the store elsewhere (storage.uri = s3://...): the data dir keeps this
        # daemon's own files (the conflict log, the review key, backups, the lock).
        data_dir = Path(self.settings.data_dir)
        if data_dir.exists() and not data_dir.is_dir():
            raise ConfigError(
                f"data_dir {data_dir} is a file, not a directory: point --data-dir at a "
                "directory (a missing one is created)"
            )
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            lock = (data_dir / "memoryd.lock").open("a+")
        except OSError as e:
            raise ConfigError(
                f"data_dir {data_dir} is not writable ({e.strerror}): memoryd "
                "keeps its store and lock file there. Fix its ownership or permissions so the "
                "user running memoryd can write there, remount it read-write, or point "
                "--data-dir elsewhere"
            ) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise ConfigError(
                f"data_dir {self.settings.data_dir} is in use by another memoryd; "
                "give each daemon its own --data-dir"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock_file = lock

    def _load(self) -> None:
        s = self.settings
        t0 = time.perf_counter()
        embedder = build_embedder(s)
        embedder.start()
        t1 = time.perf_counter()
        durable = LanceStore(
            s.storage_uri,
            table=s.storage.table,
            model_name=embedder.model_name,
            dim=embedder.dim,
            storage_options=dict(s.storage.storage_options),
            max_batch=s.storage.max_batch,
            compact_every=s.storage.compact_every_writes,
            cache_bytes=s.storage.cache_mib << 20,
            open_last_good=s.storage.open_last_good,
            shared=s.follow_interval > 0,
            maintenance=s.storage.maintenance,
            lease=self._maintenance_lease(),
            keep_versions_seconds=self._keep_versions(),
            purge_every_seconds=s.storage.purge_every_seconds,
            key_window=key_window(s),
        )
        try:
            analyzer = Analyzer(s.recall.analyzer_language)
        except KeyError:
            raise ConfigError(
                f"recall.analyzer_language {s.recall.analyzer_language!r} is not a "
                "language memoryd analyses (an ISO 639-1 code or a Snowball name, e.g. en, "
                "english, german, cs)"
            ) from None
        warm_up_language_detector()  # its model takes a while to load: not on a first Store
        repository = Repository(
            durable,
            analyzer,
            max_tokens=s.recall.token_vectors_max,
            ann_threshold=s.recall.ann_threshold,
            ann_ef_search=s.recall.ann_ef_search,
            ann_build_threads=s.recall.ann_build_threads,
            follow_interval=s.follow_interval,
            token_path=Path(s.data_dir) / TOKEN_FILE,
            key_window=key_window(s),
            claims=(
                KeyClaims(
                    s.storage_uri,
                    s.storage.table,
                    durable.storage_options,
                    maintains=durable.maintains,
                    keep_versions=durable.keep_versions,
                    lapse=key_window(s),
                )
                if s.follow_interval > 0
                else None
            ),
        )
        repository.open()
        t2 = time.perf_counter()
        if s.recall.cross_encoder_dir is not None:
            self.cross_encoder = CrossEncoderReranker(
                s.recall.cross_encoder_dir, max_tokens=s.embedder.max_tokens
            )
        elif s.recall.rerank == "cross-encoder":
            raise ConfigError("recall.rerank = cross-encoder needs recall.cross_encoder_dir")
        kernels = warm_up()
        log.info(
            "embedder %s (%d-d) %.2fs, store %d memories %.2fs, kernels %.2fs",
            embedder.model_name,
            embedder.dim,
            t1 - t0,
            repository.row_count(),
            t2 - t1,
            kernels,
        )
        self.embedder, self.repository = embedder, repository

    def _maintenance_lease(self) -> MaintenanceLease | None:
        """Object stores: the lease that makes one daemon of several the maintainer."""
        s = self.settings
        if is_local(s.storage_uri) or s.storage.maintenance == "off":
            return None
        options = object_store_options(s.storage_uri, dict(s.storage.storage_options))
        store = open_store(s.storage_uri, options)
        return MaintenanceLease(store, ttl_seconds=s.storage.lease_seconds)

    def _keep_versions(self) -> float:
        s = self.settings.storage
        if s.keep_versions_seconds is not None:
            return s.keep_versions_seconds
        if is_local(self.settings.storage_uri):
            return KEEP_VERSIONS_SECONDS
        return SHARED_KEEP_VERSIONS_SECONDS

    def _metric_state(self) -> dict[str, object]:
        if self.embedder is None or self.repository is None:
            return {}
        hits, misses = self.embedder.cache_stats()
        return {
            "batches": self.embedder.batches,
            "texts": self.embedder.batched_texts,
            "hits": hits,
            "misses": misses,
            **self.repository.write_counters(),
            "index_bytes": self.repository.index_bytes(),
            "scopes": self.repository.scope_sizes(),
            "follow": self.repository.follow_lag(),
            "tokens_owed": int(self.repository.tokens_owed),
            "embed_workers": self.embedder.live_workers(),
        }

    async def backup_now(self) -> Path:
        """Write a backup of every memory (all scopes), pruning old ones."""
        assert self.repository is not None
        b = self.settings.backup
        directory = b.dir or (self.settings.data_dir / "backups")
        repository = self.repository
        snapshot = repository.visible(repository.scopes(), now=datetime(1970, 1, 1, tzinfo=UTC))
        return await asyncio.to_thread(write_backup, snapshot, directory, b.keep, datetime.now(UTC))

    def _daemon_jobs(self) -> list[Job]:
        """The daemon's own periodic jobs (the components run theirs)."""
        jobs = [
            Job("sweep expired memories", SWEEP_INTERVAL_SECONDS, self._sweep_expired),
            Job("storage health", STORAGE_WATCH_SECONDS, self._watch_storage),
            Job("embedder health", STORAGE_WATCH_SECONDS, self._watch_embedder),
            Job("heap freeze", SWEEP_INTERVAL_SECONDS, self._refreeze),
        ]
        if self.settings.backup.enabled:
            hours = self.settings.backup.interval_hours
            jobs.append(Job("backup", hours * 3600, self.backup_now, first_after=0.0))
        return jobs

    async def _sweep_expired(self) -> None:
        assert self.service is not None
        removed = await self.service.sweep_expired()
        if removed:
            log.info("swept %d expired memories", removed)

    async def _refreeze(self) -> None:
        if self._freezer is None:
            repository = self.repository
            assert repository is not None

            def writes() -> int:
                counters = repository.write_counters()
                return sum(
                    counters[k] for k in ("commits", "compactions", "cleanups", "cache_drops")
                )

            self._freezer = HeapFreezer(writes, lambda: bool(repository.pending()))
        await self._freezer.run()

    async def _watch_embedder(self) -> None:
        """``""`` and the services NOT_SERVING once no embedding worker is left (a fault
        that ended their threads: batcher._exited): Recalls and Stores would all fail, so
        a balancer or an orchestrator's probe must see it. It does not come back by itself."""
        assert self.embedder is not None
        if self._embedder_serving and not self.embedder.alive():
            self._embedder_serving = False
            log.critical("no embedding worker is left: health is NOT_SERVING; restart the daemon")
            for name in ("", *SERVICE_NAMES):
                await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    async def _watch_storage(self) -> None:
        """Mirror the store's write status in the ``memoryd.storage`` health entry, and
        whether following the shared store works in ``memoryd.follow``."""
        assert self.repository is not None
        status = health_pb2.HealthCheckResponse
        ok = self.repository.writable()
        if ok != self._storage_serving:
            self._storage_serving = ok
            await self.health.set(STORAGE_HEALTH_NAME, status.SERVING if ok else status.NOT_SERVING)
        interval = self.settings.follow_interval
        limit = max(FOLLOW_FAILING_LOOKS * interval, FOLLOW_FAILING_MIN_SECONDS)
        following = self.repository.follow_failing_for() <= limit
        if following != self._follow_serving:
            self._follow_serving = following
            if not following:
                log.warning("following the shared store has failed for over %.1fs", limit)
            serving = status.SERVING if following else status.NOT_SERVING
            await self.health.set(FOLLOW_HEALTH_NAME, serving)

    async def stop(self) -> None:
        grace = self.settings.server.shutdown_grace_seconds
        started = time.perf_counter()
        await self.health.enter_graceful_shutdown()
        self.servicer.begin_drain()  # open Streams take no new op
        if self.server is not None:
            calls = self.metrics.in_flight
            if calls:
                log.info("stopping: %d calls in flight, waiting up to %.0fs for them", calls, grace)
            await self.server.stop(grace)
        await self._jobs.stop()
        if self._keys_watch is not None:
            self._keys_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keys_watch
        if self.repository is not None:
            await self.repository.shutdown()
        if self.embedder is not None:
            await asyncio.to_thread(self.embedder.close)
        if self.cross_encoder is not None:
            self.cross_encoder.close()
        self.metrics.close()
        if self.tracer_provider is not None:
            tracing.install(None)
            # Flushes the spans still queued (a Batch processor's) before exit.
            await asyncio.to_thread(self.tracer_provider.shutdown)
        if self._lock_file is not None:
            self._lock_file.close()
        if self.server is not None:  # it served: a start refused before binding says only why
            log.info("stopped in %.1fs", time.perf_counter() - started)


async def serve(settings: Settings) -> bool:
    """Run until SIGTERM or SIGINT. True: the stop left a compaction running, and the
    process must end at once (an interpreter's ordinary exit waits for Lance's threads,
    minutes after a burst of Stores, long past a supervisor's stop timeout)."""
    daemon = Daemon(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if daemon.keys is not None:
        loop.add_signal_handler(signal.SIGHUP, daemon.keys.reload)
    try:
        port = await daemon.start()
        host = settings.listen.rpartition(":")[0]
        # One line for humans and for scripts that started us on port 0.
        print(f"memoryd serving on {host}:{port}", flush=True)
        await stop.wait()
    except BaseException as e:
        await daemon.stop()
        # (the process must end at once after this error too: cli._serve)
        e.abandoned_compaction = _abandoned(daemon)  # type: ignore[attr-defined]
        raise
    await daemon.stop()
    return _abandoned(daemon)


def _abandoned(daemon: Daemon) -> bool:
    return daemon.repository is not None and daemon.repository.abandoned_compaction
