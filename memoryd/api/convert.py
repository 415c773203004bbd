"""The only place that turns protobuf messages into domain objects and back."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp
from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb

from memoryd.core import review
from memoryd.core.errors import InvalidArgument
from memoryd.core.hooks import CaptureResult, ContextResult
from memoryd.core.language import LANGUAGES
from memoryd.core.provenance import vouched
from memoryd.core.records import (
    PROMOTED_FROM_KEY,
    Category,
    Conflict,
    Explain,
    FollowLag,
    ForgetResult,
    Memory,
    ScoredMemory,
    StoreResult,
)
from memoryd.core.service import AgentStats, MemoryPatch, NewMemory, Page, RecallQuery

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ts(value: datetime | None) -> Timestamp | None:
    # Integer arithmetic, as Timestamp.FromDatetime does, without its per-call overhead
    # (a Recall answer carries up to four timestamps per memory).
    if value is None:
        return None
    delta = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)) - _EPOCH
    return Timestamp(seconds=delta.days * 86_400 + delta.seconds, nanos=delta.microseconds * 1000)


def _from_ts(msg: object, name: str) -> datetime | None:
    if not msg.HasField(name):  # type: ignore[attr-defined]
        return None
    ts: Timestamp = getattr(msg, name)
    if not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(f"{name} has invalid nanos {ts.nanos}")
    try:
        return ts.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{name} is out of range") from None


def category(value: int, field: str = "category") -> Category:
    try:
        return Category(value)
    except ValueError:
        raise InvalidArgument(
            f"{field} {value} is not a known Category (0-{max(Category)})"
        ) from None


def categories(values: Iterable[int]) -> frozenset[Category]:
    found = set()
    for v in values:
        c = category(v, "categories")
        if c != Category.UNSPECIFIED:
            found.add(c)
    return frozenset(found)


def memory_to_pb(m: Memory, *, summary_as_text: bool = False) -> pb.Memory:
    """``summary_as_text``: Recall without full_text shows long memories by their summary."""
    out = pb.Memory()
    _fill_memory(out, m, summary_as_text)
    return out


def _fill_memory(out: pb.Memory, m: Memory, summary_as_text: bool) -> None:
    """Write ``m`` into ``out`` in place: a message built with keyword arguments is copied
    again into its parent (a Recall answer's ScoredMemory), and each Timestamp once more;
    filling the parent's own sub-messages halves a Recall answer's building time."""
    use_summary = summary_as_text and bool(m.summary) and m.summary != m.text
    out.id = m.id
    out.agent_id = m.agent_id
    out.scope = m.scope
    out.text = m.summary if use_summary else m.text
    out.summary = m.summary
    out.category = int(m.category)  # type: ignore[assignment]
    out.importance = m.importance
    if m.metadata:
        out.metadata.update(m.metadata)
    out.access_count = m.access_count
    if m.related_ids:
        out.related_ids.extend(m.related_ids)
    out.supersedes = m.supersedes
    out.superseded_by = m.superseded_by
    out.text_is_summary = use_summary
    out.language = m.language
    _set_ts(out.created_at, m.created_at)
    _set_ts(out.updated_at, m.updated_at)
    if m.expires_at is not None:
        _set_ts(out.expires_at, m.expires_at)
    if m.last_accessed_at is not None:
        _set_ts(out.last_accessed_at, m.last_accessed_at)


def _set_ts(out: Timestamp, value: datetime) -> None:
    """``_ts`` into a message's own Timestamp field (which setting marks present)."""
    delta = (value if value.tzinfo is not None else value.replace(tzinfo=UTC)) - _EPOCH
    out.seconds = delta.days * 86_400 + delta.seconds
    out.nanos = delta.microseconds * 1000


def memory_from_pb(p: pb.Memory) -> Memory:
    """An imported memory (ImportRequest.memory); validated by the service."""
    return Memory(
        id=p.id,
        agent_id=p.agent_id,
        scope=p.scope,
        text=p.text,
        summary=p.summary,
        category=category(p.category),
        importance=p.importance,
        created_at=_from_ts(p, "created_at") or datetime.now(UTC),
        updated_at=_from_ts(p, "updated_at") or datetime.now(UTC),
        expires_at=_from_ts(p, "expires_at"),
        metadata=vouched(p.metadata),
        access_count=p.access_count,
        last_accessed_at=_from_ts(p, "last_accessed_at"),
        related_ids=tuple(p.related_ids),
        supersedes=p.supersedes,
        superseded_by=p.superseded_by,
        language=p.language if p.language in LANGUAGES else "",  # else detected on write
    )


def _explain_to_pb(e: Explain | None) -> pb.StageScores | None:
    if e is None:
        return None
    return pb.StageScores(
        vector=e.vector,
        bm25=e.bm25,
        vector_rank=e.vector_rank,
        bm25_rank=e.bm25_rank,
        fused=e.fused,
        reranked=e.reranked,
        after_recency=e.after_recency,
        after_importance=e.after_importance,
        after_length=e.after_length,
        after_decay=e.after_decay,
        final=e.final,
        mmr_position=e.mmr_position,
        reranker=e.reranker,
        query_language=e.query_language,
        dense_trust=e.dense_trust,
        time_expression=e.time_expression,
        time_window_start=_ts(e.time_window_start),
        time_window_end=_ts(e.time_window_end),
        time_boost=e.time_boost,
    )


def scored_to_pb(
    items: Iterable[ScoredMemory], *, summary_as_text: bool = False
) -> list[pb.ScoredMemory]:
    out = []
    for s in items:
        scored = pb.ScoredMemory(score=s.score, explain=_explain_to_pb(s.explain))
        _fill_memory(scored.memory, s.memory, summary_as_text)
        out.append(scored)
    return out


_FUSION = {1: "rrf", 2: "weighted", 3: "vector", 4: "bm25"}
_RERANK = {1: "none", 2: "cross-encoder", 3: "late-interaction"}
_OPTIONAL_FLOATS = (
    "vector_weight", "bm25_weight", "rrf_k", "recency_weight", "recency_half_life_days",
    "importance_weight", "length_weight", "length_anchor_chars", "decay_half_life_days",
    "decay_floor", "reinforcement", "mmr_lambda", "rerank_weight", "bm25_scale",
)  # fmt: skip


def recall_options(o: pb.RecallOptions) -> dict[str, object]:
    """The options a request sets, as RetrievalConfig field overrides."""
    out: dict[str, object] = {}
    if o.fusion:
        if o.fusion not in _FUSION:
            raise InvalidArgument(f"options.fusion {o.fusion} is not a known FusionMode")
        out["fusion"] = _FUSION[o.fusion]
    if o.rerank:
        if o.rerank not in _RERANK:
            raise InvalidArgument(f"options.rerank {o.rerank} is not a known RerankMode")
        out["rerank"] = _RERANK[o.rerank]
    for name in _OPTIONAL_FLOATS:
        if o.HasField(name):  # type: ignore[arg-type]
            out[name] = float(getattr(o, name))
    if o.HasField("candidate_pool"):
        out["candidate_pool"] = int(o.candidate_pool)
    return out


def store_request(req: pb.StoreRequest) -> NewMemory:
    return NewMemory(
        agent_id=req.agent_id,
        text=req.text,
        category=category(req.category),
        importance=req.importance if req.HasField("importance") else None,
        scope=req.scope,
        metadata=vouched(req.metadata),
        idempotency_key=req.idempotency_key,
        created_at=_from_ts(req, "created_at"),
        expires_at=_from_ts(req, "expires_at"),
        ttl=_TTL[req.ttl] if req.ttl in _TTL else _bad_ttl(req.ttl),
    )


_TTL = {0: "", 1: "permanent", 2: "session", 3: "short"}


def _bad_ttl(value: int) -> str:
    raise InvalidArgument(f"ttl {value} is not a known Ttl (0-3)")


def store_response(r: StoreResult) -> pb.StoreResponse:
    return pb.StoreResponse(
        memory=memory_to_pb(r.memory),
        outcome=int(r.outcome),  # type: ignore[arg-type]
        duplicate_of=r.duplicate_of,
        duplicate_score=r.duplicate_score,
    )


def recall_request(req: pb.RecallRequest) -> RecallQuery:
    return RecallQuery(
        agent_id=req.agent_id,
        query=req.query,
        limit=req.limit,
        min_score=req.min_score,
        categories=categories(req.categories),
        scopes=tuple(req.scopes),
        options=recall_options(req.options) if req.HasField("options") else {},
        explain=req.explain,
        as_of=_from_ts(req.options, "as_of") if req.HasField("options") else None,
        created_after=_from_ts(req, "created_after"),
        created_before=_from_ts(req, "created_before"),
        reference_time=_from_ts(req, "reference_time"),
        timezone=req.timezone,
        time_expressions=not req.ignore_time_expressions,
    )


def recall_response(results: list[ScoredMemory], *, full_text: bool) -> pb.RecallResponse:
    response = pb.RecallResponse()
    add = response.results.add  # each result built in place: no copy into the answer
    for s in results:
        scored = add(score=s.score)
        if (explain := _explain_to_pb(s.explain)) is not None:
            scored.explain.CopyFrom(explain)
        _fill_memory(scored.memory, s.memory, not full_text)
    return response


def conflicts_response(items: list[Conflict]) -> pb.ListConflictsResponse:
    return pb.ListConflictsResponse(
        conflicts=[
            pb.Conflict(
                at=_ts(c.at),
                new_id=c.new_id,
                existing_id=c.existing_id,
                new_agent_id=c.new_agent_id,
                existing_agent_id=c.existing_agent_id,
                new_text=c.new_text,
                existing_text=c.existing_text,
                score=c.score,
                category=int(c.category),  # type: ignore[arg-type]
                merge_decision=c.merge_decision,
                scope=c.scope,
            )
            for c in items
        ]
    )


def forget_response(r: ForgetResult) -> pb.ForgetResponse:
    return pb.ForgetResponse(deleted_ids=r.deleted_ids, candidates=scored_to_pb(r.candidates))


def update_request(req: pb.UpdateRequest) -> MemoryPatch:
    return MemoryPatch(
        agent_id=req.agent_id,
        id=req.id,
        text=req.text if req.HasField("text") else None,
        importance=req.importance if req.HasField("importance") else None,
        category=category(req.category),
        metadata=vouched(req.metadata),
        replace_metadata=req.replace_metadata,
        remove_metadata_keys=tuple(req.remove_metadata_keys),
        expires_at=_from_ts(req, "expires_at"),
        clear_expires_at=req.clear_expires_at,
    )


def list_response(page: Page) -> pb.ListResponse:
    return pb.ListResponse(
        memories=[memory_to_pb(m) for m in page.memories],
        next_page_token=page.next_page_token,
        total_size=page.total_size,
    )


def stats_response(s: AgentStats, uptime: float, version: str) -> pb.StatsResponse:
    return pb.StatsResponse(
        total=s.total,
        by_scope=s.by_scope,
        by_category=s.by_category,
        expired_pending=s.expired_pending,
        embedding_model=s.embedding_model,
        embedding_dim=s.embedding_dim,
        index_bytes=s.index_bytes,
        uptime_seconds=uptime,
        version=version,
        store_rows=s.store_rows,
    )


def set_follow_lag(response: pb.StatsResponse, lag: FollowLag) -> None:
    response.follow_applied_version = lag.applied_version
    response.follow_latest_version = lag.latest_version
    since = lag.seconds_since_check
    response.follow_seconds_since_check = -1.0 if since is None else since


def context_time(req: hooks_pb.BuildContextRequest) -> dict[str, object]:
    """BuildContextRequest's time fields as RecallQuery fields."""
    return {
        "created_after": _from_ts(req, "created_after"),
        "created_before": _from_ts(req, "created_before"),
        "reference_time": _from_ts(req, "reference_time"),
        "timezone": req.timezone,
    }


def context_response(r: ContextResult) -> hooks_pb.BuildContextResponse:
    return hooks_pb.BuildContextResponse(
        context=r.context, results=scored_to_pb(r.results), skipped_reason=r.skipped_reason
    )


def capture_response(r: CaptureResult) -> hooks_pb.CaptureResponse:
    return hooks_pb.CaptureResponse(
        captured=[memory_to_pb(m) for m in r.captured],
        decisions=[
            hooks_pb.CaptureDecision(
                index=d.index,
                captured=d.captured,
                reason=d.reason,
                detail=d.detail,
                memory_id=d.memory_id,
            )
            for d in r.decisions
        ],
    )


# -- ReviewService ---------------------------------------------------------------------------


def _review_action(a: review_pb.ReviewAction) -> review.Action:
    try:
        kind = review.ActionKind(a.kind)
    except ValueError:
        raise InvalidArgument(f"action.kind {a.kind} is not a known ReviewActionKind") from None
    return review.Action(kind, a.memory_id, a.keep_id, a.target_scope, a.stale_after_days)


def _review_kind(value: int, name: str) -> review.Kind:
    try:
        return review.Kind(value)
    except ValueError:
        raise InvalidArgument(f"{name} {value} is not a known ReviewKind") from None


def prepare_review_request(r: review_pb.PrepareReviewRequest) -> review.PrepareQuery:
    kinds = frozenset(_review_kind(k, "kinds") for k in r.kinds) - {review.Kind.UNSPECIFIED}
    return review.PrepareQuery(
        agent_id=r.agent_id,
        scopes=tuple(r.scopes),
        kinds=kinds,
        promotions=tuple((p.memory_id, p.target_scope) for p in r.promotions),
        max_items=r.max_items,
        duplicate_min_score=r.duplicate_min_score if r.HasField("duplicate_min_score") else None,
        stale_after_days=r.stale_after_days if r.HasField("stale_after_days") else None,
    )


def _review_memory(m: Memory, digest: str) -> review_pb.ReviewMemory:
    return review_pb.ReviewMemory(
        id=m.id,
        hash=digest,
        agent_id=m.agent_id,
        scope=m.scope,
        category=int(m.category),  # type: ignore[arg-type]
        text=m.text,
        access_count=m.access_count,
        last_accessed_at=_ts(m.last_accessed_at),
        created_at=_ts(m.created_at),
        expires_at=_ts(m.expires_at),
        superseded_by=m.superseded_by,
        asserted_by=review.provenance(m),
        importance=m.importance,
        supersedes=m.supersedes,
        promoted_from=m.metadata.get(PROMOTED_FROM_KEY, ""),
    )


def review_item_to_pb(item: review.Item) -> review_pb.ReviewItem:
    a = item.action
    return review_pb.ReviewItem(
        item_id=item.item_id,
        kind=int(item.kind),  # type: ignore[arg-type]
        risk=int(item.risk),  # type: ignore[arg-type]
        memories=[_review_memory(m, h) for m, h in zip(item.memories, item.hashes, strict=True)],
        score=item.score,
        reason=item.reason,
        action=review_pb.ReviewAction(
            kind=int(a.kind),  # type: ignore[arg-type]
            memory_id=a.memory_id,
            keep_id=a.keep_id,
            target_scope=a.target_scope,
            stale_after_days=a.stale_after_days,
        ),
        preconditions=[
            review_pb.Precondition(kind=p.kind, memory_id=p.memory_id, detail=p.detail)
            for p in item.preconditions
        ],
        needs_item_approval=item.needs_item_approval,
        blocked=item.blocked,
        bundle_id=item.bundle_id,
        signature=item.signature,
    )


def prepare_review_response(p: review.Prepared) -> review_pb.PrepareReviewResponse:
    return review_pb.PrepareReviewResponse(
        items=[review_item_to_pb(i) for i in p.items],
        prepared_at=_ts(p.prepared_at),
        memories_scanned=p.memories_scanned,
        truncated=p.truncated,
        bundle_id=p.bundle_id,
    )


def apply_review_request(r: review_pb.ApplyReviewRequest) -> list[review.Approved]:
    items = []
    for it in r.items:
        try:
            approval = review.Approval(it.approval)
        except ValueError:
            raise InvalidArgument(f"approval {it.approval} is not a known Approval") from None
        hashes = {h.id: h.hash for h in it.hashes}
        if len(hashes) != len(it.hashes):
            raise InvalidArgument(f"item {it.item_id!r} names a memory twice in hashes")
        items.append(
            review.Approved(
                item_id=it.item_id,
                kind=_review_kind(it.kind, "kind"),
                action=_review_action(it.action),
                hashes=hashes,
                approval=approval,
                bundle_id=it.bundle_id,
                signature=it.signature,
            )
        )
    return items


def apply_review_response(results: list[review.ItemResult]) -> review_pb.ApplyReviewResponse:
    counts = {o: sum(1 for r in results if r.outcome == o) for o in review.Outcome}
    return review_pb.ApplyReviewResponse(
        results=[
            review_pb.ItemResult(
                item_id=r.item_id,
                outcome=int(r.outcome),  # type: ignore[arg-type]
                message=r.message,
                changed_ids=list(r.changed_ids),
            )
            for r in results
        ],
        applied=counts[review.Outcome.APPLIED],
        already_applied=counts[review.Outcome.ALREADY_APPLIED],
        conflicts=counts[review.Outcome.CONFLICT],
        refused=counts[review.Outcome.REFUSED],
    )
