"""Writing memories: Store, Import and Update, on validated requests (``core.validate``).

A Store goes through, in order:
- its idempotency key: a key already used replays its first answer (while that Store is
  still running, by waiting for it);
- exact and near duplicates: in the scope, then among the Stores still being written,
  so concurrent twins become one memory (``core.singleflight``);
- the merge policy (``core.lifecycle``): link, supersede, or fold the text into the
  closest memory with the LLM, if one is configured;
- the summary (extractive, or the LLM's; one that looks like a prompt injection is not kept:
  the memory is then shown by its text), the write, and for a decision the hand-off to
  the conflict log (which never blocks or fails a Store).

Dedupe and merge compare with what a scope holds, so they only run where the caller may
read: in a write-only scope (a drop box) an answer of DUPLICATE, or a link, would reveal
memories the caller cannot see.

With several daemons over one store, a Store first applies what the others committed
(``MemoryStore.catch_up``: while its text is embedded), so the key and the duplicate checks
see every Store acknowledged before it began, on any daemon. Two Stores with one key on
two daemons at the same moment both write; the key's claim (``claim_key``, a conditional
insert the store refuses to the second) names one memory, and the other daemon deletes its
own and answers with that one. Two unkeyed Stores of the same or similar text on two
daemons at the same moment (each began before the other's commit) are two memories.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

import numpy as np

from memoryd.core import tracing
from memoryd.core.errors import InvalidArgument, NotFound
from memoryd.core.injection import detect_injection
from memoryd.core.lifecycle import (
    MERGE_SYSTEM,
    SUMMARY_SYSTEM,
    MergePlan,
    in_band,
    merge_prompt,
    plan_merge,
)
from memoryd.core.policy import Access
from memoryd.core.protocols import ConflictLog, Embedder, MemoryStore, TextModel
from memoryd.core.records import (
    PROVENANCE_KEY,
    TRUSTED_ASSERTERS,
    Category,
    Conflict,
    KeyRecord,
    Memory,
    StoreOutcome,
    StoreResult,
)
from memoryd.core.requests import ServiceLimits
from memoryd.core.retrieval import Retriever
from memoryd.core.singleflight import Abandoned, SingleFlight
from memoryd.core.summarize import count_words, extractive_summary
from memoryd.core.text import content_hash
from memoryd.core.validate import (
    ValidImport,
    ValidPatch,
    ValidStore,
    check_injection,
    check_metadata,
    check_text,
)

log = logging.getLogger(__name__)


class Parts(Protocol):
    """What ingest works with: the service's collaborators, read at each use (so one
    replaced on the service, as tests do, is the one used)."""

    store: MemoryStore
    embedder: Embedder
    retriever: Retriever
    limits: ServiceLimits
    clock: Callable[[], datetime]
    conflicts: ConflictLog | None
    text_model: TextModel | None

    def locked(self, ids: Sequence[str]) -> AbstractAsyncContextManager[None]:
        """The per-memory locks Update and review Apply hold (``MemoryService.locked``)."""
        ...


@dataclass(frozen=True, slots=True)
class _KeyUse:
    """The first answer given for an idempotency key, and what it was given for."""

    content_hash: str
    scope: str
    result: StoreResult


@dataclass(frozen=True, slots=True, eq=False)
class _Creating:
    """A new memory being written: what later Stores compare with (key by identity)."""

    scope: str
    content_hash: str
    vector: np.ndarray


async def _nothing() -> None:
    return None


def visible(store: MemoryStore, access: Access, memory_id: str, now: datetime) -> Memory:
    """The memory, if the caller may read it; absent, unreadable and expired all look the
    same (NotFound): no existence leaks."""
    memory = store.get(memory_id)
    if memory is None or memory.scope not in access.read or memory.is_expired(now):
        raise NotFound(f"memory {memory_id} not found")
    return memory


class Ingest:
    def __init__(self, parts: Parts):
        self.parts = parts
        # Keyed Stores in flight, by (agent, key): a retry waits for the first's answer.
        self._keys: SingleFlight[tuple[str, str], _KeyUse] = SingleFlight()
        # Memories between their duplicate check and their write.
        self._creating: SingleFlight[_Creating, StoreResult] = SingleFlight()

    # -- Store -------------------------------------------------------------------------

    async def store(self, access: Access, v: ValidStore) -> StoreResult:
        key = v.idempotency_key
        if not key:
            return await self._store_new(access, v)
        # Another daemon over the same store may have answered this key: see its commits.
        await self.parts.store.catch_up()
        used = await self._keys.run((access.agent_id, key), lambda: self._first_use(access, v))
        if used.content_hash != v.content_hash or used.scope != v.scope:
            raise InvalidArgument(
                f"idempotency_key {key!r} was already used for a different memory "
                f"({used.result.memory.id}); use a new key for new content"
            )
        return used.result

    async def _first_use(self, access: Access, v: ValidStore) -> _KeyUse:
        """The answer of a key no Store in flight holds: the one it gave before, or a new
        Store's (whose answer, when it created nothing, is recorded for the retries)."""
        recorded = self._recorded_use(access, v)
        if recorded is not None:
            return recorded
        result = await self._store_new(access, v)
        # Several daemons: the same key may be deciding on another one right now.
        named = await self.parts.store.claim_key(
            access.agent_id, v.idempotency_key, result.memory.id
        )
        if named != result.memory.id and (lost := await self._claimed(access, v, result, named)):
            return lost
        if result.outcome != StoreOutcome.CREATED or v.scope not in access.read:
            # Nothing new holds the key: record the answer so a retry replays it. Or the
            # memory is in a scope its writer cannot read: the record keeps the hash of
            # what was sent, which a retry is held to (its current text may be a reader's
            # Update, not the writer's to compare with: _as_sent).
            await self.parts.store.record_key(
                KeyRecord(
                    access.agent_id,
                    v.idempotency_key,
                    result.memory.id,
                    result.outcome,
                    v.content_hash,
                    v.scope,
                    result.duplicate_score,
                    self.parts.clock(),
                )
            )
        return _KeyUse(v.content_hash, v.scope, result)

    async def _claimed(
        self, access: Access, v: ValidStore, mine: StoreResult, named: str
    ) -> _KeyUse | None:
        """A Store on another daemon claimed the key first, for memory ``named``: its
        answer, and the memory this one created (if any) deleted again. None (keep this
        one's answer) when that memory is gone (forgotten since), or is in a scope the
        caller may not read and was not made by its Store under this key."""
        store = self.parts.store
        await store.catch_up()  # it wrote its memory before claiming: now it is here
        winner = store.get(named)
        key = v.idempotency_key
        if winner is None:
            return None
        if winner.scope not in access.read:
            # A scope this caller may only write: the other Store under this key made it
            # (it never answers DUPLICATE there). This one's copy goes, and the answer is
            # the memory as sent, held to the winner's text: it was made a moment ago, by
            # a Store of this caller with this key.
            if winner.agent_id != access.agent_id or winner.idempotency_key != key:
                return None
            if mine.outcome == StoreOutcome.CREATED:
                await store.delete([mine.memory.id])
            return self._as_sent(winner, v, winner.content_hash)
        if mine.outcome == StoreOutcome.CREATED:
            await store.delete([mine.memory.id])
        if winner.agent_id == access.agent_id and winner.idempotency_key == key:
            return _KeyUse(
                winner.content_hash, winner.scope, StoreResult(winner, StoreOutcome.CREATED)
            )
        # Its Store found a duplicate (or merged): that memory, as a duplicate.
        score = 1.0 if winner.content_hash == v.content_hash else mine.duplicate_score
        result = StoreResult(winner, StoreOutcome.DUPLICATE, winner.id, score)
        return _KeyUse(v.content_hash, v.scope, result)

    def _recorded_use(self, access: Access, v: ValidStore) -> _KeyUse | None:
        """The answer an earlier Store gave for ``v``'s key: the memory it created, or the
        one it named (DUPLICATE, MERGED) as long as that exists and the agent may read it."""
        store = self.parts.store
        agent_id, key = access.agent_id, v.idempotency_key
        record = store.key_record(agent_id, key)
        if record is not None and (named := store.get(record.memory_id)) is not None:
            if named.scope in access.read:
                if record.outcome == StoreOutcome.CREATED:
                    return _KeyUse(
                        record.content_hash, record.scope, StoreResult(named, record.outcome)
                    )
                result = StoreResult(named, record.outcome, named.id, record.score)
                return _KeyUse(record.content_hash, record.scope, result)
            if record.outcome == StoreOutcome.CREATED and named.agent_id == agent_id:
                return self._as_sent(named, v, record.content_hash)
        if (found := store.find_by_idempotency_key(agent_id, key)) is not None:
            if found.scope not in access.read:
                # (written before its key was recorded with the hash sent: not checked)
                return self._as_sent(found, v, v.content_hash)
            result = StoreResult(found, StoreOutcome.CREATED)
            return _KeyUse(found.content_hash, found.scope, result)
        return None

    def _as_sent(self, found: Memory, v: ValidStore, sent_hash: str) -> _KeyUse:
        """A retry of a Store into a scope its caller may only write (a drop box): the
        memory as that caller's request makes it, under the id and time it was created
        with. What the scope's readers did to it since (an Update, their metadata, links,
        Recalls), and whether its text is still the one sent, is not the writer's to see:
        the memory as it is now, and a refusal of a retry whose text differs from the
        current one, both told it (helper-66's review). ``sent_hash``: the hash of the text
        the first Store sent, which a retry's must match (another text under the same key is
        refused, as in a scope the caller reads)."""
        memory = Memory(
            id=found.id,
            agent_id=found.agent_id,
            scope=found.scope,
            text=v.text,
            summary=self._kept_summary(
                extractive_summary(v.text, self.parts.limits.summary_max_words), v.text
            ),
            category=v.category,
            importance=v.importance,
            created_at=found.created_at,
            updated_at=found.created_at,
            expires_at=v.expires_at,
            metadata=dict(v.metadata),
            content_hash=v.content_hash,
            idempotency_key=v.idempotency_key,
            language=self.parts.retriever.language_of(v.text),
        )
        return _KeyUse(sent_hash, found.scope, StoreResult(memory, StoreOutcome.CREATED))

    async def _store_new(self, access: Access, v: ValidStore) -> StoreResult:
        p = self.parts
        scope, digest = v.scope, v.content_hash
        readable = scope in access.read
        exact = self._exact_duplicate(scope, digest) if readable else None
        if exact is not None:
            return StoreResult(exact, StoreOutcome.DUPLICATE, exact.id, 1.0)
        # While the model runs: another daemon's commits, so the checks below see them too.
        (vector, tokens), _ = await asyncio.gather(
            self.embed_document(v.text), p.store.catch_up() if readable else _nothing()
        )
        now = p.clock()
        # Re-check after the await: the world may have changed while the model ran.
        exact = self._exact_duplicate(scope, digest) if readable else None
        if exact is not None:
            return StoreResult(exact, StoreOutcome.DUPLICATE, exact.id, 1.0)
        near = p.store.search(vector, [scope], 5, now=now) if readable else []
        language = p.retriever.language_of(v.text)
        vector_reads = p.retriever.reads(language)
        if not vector_reads:  # its cosine cannot tell this language's texts apart: exact only
            near = []
        threshold = p.limits.duplicate_threshold
        if near and near[0][1] >= threshold:
            twin, score = near[0]
            return StoreResult(twin, StoreOutcome.DUPLICATE, twin.id, float(score))
        for flight in self._creating.running() if readable else []:
            other = flight.key
            if other.scope != scope:
                continue
            if other.content_hash == digest:
                score = 1.0
            else:
                score = float(np.dot(other.vector, vector)) if vector_reads else 0.0
            if score >= threshold:
                try:
                    first = await flight.outcome()
                except Abandoned:  # its caller gave up before writing it: go on
                    continue
                return StoreResult(first.memory, StoreOutcome.DUPLICATE, first.memory.id, score)

        plan = plan_merge(p.limits.merge, v.category, threshold, near)
        if plan.merge_into:
            merged = await self._llm_merge(plan.merge_into, v)
            if merged is not None:
                score = next((s for m, s in near if m.id == plan.merge_into), 0.0)
                return StoreResult(merged, StoreOutcome.MERGED, merged.id, float(score))
            plan = MergePlan(related=(plan.merge_into,), decision="linked")
        memory = Memory(
            id=str(uuid.uuid4()),
            # one object per agent and scope for all its memories (the hot index keeps them)
            agent_id=sys.intern(access.agent_id),
            scope=sys.intern(scope),
            text=v.text,
            summary=await self.summary(v.text),
            category=v.category,
            importance=v.importance,
            created_at=v.created_at,
            updated_at=now,
            expires_at=v.expires_at,
            metadata=dict(v.metadata),
            content_hash=digest,
            idempotency_key=v.idempotency_key,
            related_ids=tuple(plan.related),
            supersedes=plan.supersedes,
            language=language,
        )

        async def write() -> StoreResult:
            return StoreResult(await p.store.add(memory, vector, tokens), StoreOutcome.CREATED)

        result = await self._creating.run(_Creating(scope, digest, vector), write)
        if v.category == Category.DECISION and p.conflicts is not None:
            await self._log_conflicts(access, result.memory, vector, plan)
        return result

    def _exact_duplicate(self, scope: str, digest: str) -> Memory | None:
        found = self.parts.store.find_by_hash(scope, digest)
        # Storing again what was superseded makes it current again: not a duplicate.
        return None if found is None or found.superseded_by else found

    # -- merge, summary, conflicts -------------------------------------------------------

    async def summary(self, text: str) -> str:
        """Extractive by default; with ``store.summarizer = "llm"`` and an endpoint, an LLM
        summary of long texts (at most ``summary_max_words``), extractive on any failure."""
        p = self.parts
        words = p.limits.summary_max_words
        extractive = self._kept_summary(extractive_summary(text, words), text)
        if p.limits.summarizer != "llm" or p.text_model is None or extractive == text:
            return extractive
        try:
            summary = await p.text_model.complete(
                SUMMARY_SYSTEM.format(words=words), text, max_tokens=words * 3
            )
        except Exception as e:
            log.warning("LLM summary failed (%s); using the extractive one", e)
            return extractive
        if p.limits.reject_injection and detect_injection(summary) is not None:
            # Recall shows a long memory by its summary: the model's words reach models too.
            log.warning("the LLM summary looks like a prompt injection; using the extractive one")
            return extractive
        if count_words(summary) <= words:
            return summary
        return self._kept_summary(extractive_summary(summary, words), text)

    def _kept_summary(self, summary: str, text: str) -> str:
        """``summary``, or ``text`` itself when the summary looks like a prompt injection.
        An extractive summary keeps some of a text's sentences (a line is one): leaving out
        the lines between "Ignore all" and "previous instructions" would join them into an
        injection the text as a whole is not, and Recall shows a long memory by its
        summary. Shown by its text, the memory is shown as the rules read it."""
        if summary == text or not self.parts.limits.reject_injection:
            return summary
        if detect_injection(summary) is None:
            return summary
        log.warning("a summary looks like a prompt injection; the memory is shown by its text")
        return text

    async def _llm_merge(self, target_id: str, v: ValidStore) -> Memory | None:
        """Fold ``v``'s text into memory ``target_id`` with the LLM; None if that is not
        possible (no endpoint, endpoint failure, a merged text that fails the store's
        checks, or the memory changed or went while the model ran)."""
        p = self.parts
        existing = p.store.get(target_id)
        if p.text_model is None or existing is None:
            return None
        text = v.text
        try:
            merged = await p.text_model.complete(MERGE_SYSTEM, merge_prompt(existing.text, text))
            merged = check_text(merged, "merged text", p.limits)
            check_injection(merged, "the merged text was not stored", p.limits)
            vector, tokens = await self.embed_document(merged)
        except Exception as e:
            log.warning("LLM merge failed (%s); linking the memories instead", e)
            return None
        summary = await self.summary(merged)
        # Under the memory's lock, as an Update: one that landed while the model ran is
        # not overwritten by a text merged from what it replaced (helper-67's review).
        async with p.locked([target_id]):
            current = p.store.get(target_id)
            if current is None or current.content_hash != existing.content_hash:
                log.info("memory %s changed while the LLM merged into it: linking", target_id)
                return None
            meta = current.metadata
            if (
                meta.get(PROVENANCE_KEY) in TRUSTED_ASSERTERS
                and v.metadata.get(PROVENANCE_KEY) not in TRUSTED_ASSERTERS
            ):
                # Words nobody vouched for folded in: as an Update of its text, what a
                # person said is no longer all it holds.
                meta = {**meta, PROVENANCE_KEY: "assistant"}
            updated = replace(
                current,
                text=merged,
                content_hash=content_hash(merged),
                summary=summary,
                importance=max(current.importance, v.importance),
                metadata=meta,
                updated_at=p.clock(),
            )
            return await p.store.replace(updated, vector, tokens)

    async def _log_conflicts(
        self, access: Access, memory: Memory, vector: np.ndarray, plan: MergePlan
    ) -> None:
        p = self.parts
        assert p.conflicts is not None
        lim = p.limits
        hits = p.store.search(
            vector, access.read, 5, now=p.clock(), categories=frozenset({Category.DECISION})
        )
        for other, score in hits:
            if other.agent_id == memory.agent_id or not in_band(
                score, lim.merge.band_low, lim.duplicate_threshold
            ):
                continue
            decision = (
                "superseded"
                if plan.supersedes == other.id
                else ("linked" if other.id in plan.related else "kept")
            )
            conflict = Conflict(
                at=memory.updated_at, new_id=memory.id, existing_id=other.id,
                new_agent_id=memory.agent_id, existing_agent_id=other.agent_id,
                new_text=memory.text, existing_text=other.text, score=float(score),
                category=Category.DECISION, merge_decision=decision, scope=memory.scope,
                existing_scope=other.scope,
            )  # fmt: skip
            try:
                await asyncio.to_thread(p.conflicts.append, conflict)
            except Exception:  # the log must never block or fail a store
                log.exception("could not append to the conflict log")

    # -- Update --------------------------------------------------------------------------

    async def update(self, access: Access, v: ValidPatch) -> Memory:
        """Apply a patch (the caller holds the memory's lock: ``MemoryService.locked``)."""
        p = self.parts
        memory = visible(p.store, access, v.id, p.clock())
        access.check_write(memory.scope)
        changes: dict[str, object] = {}
        if v.text is not None and v.text != memory.text:
            # Checked here, not with the request: a text the memory already holds (kept
            # from before the check, or with it off) is not new words and is no refusal.
            check_injection(v.text, "text was not updated", p.limits)
            changes.update(
                text=v.text, content_hash=content_hash(v.text), summary=await self.summary(v.text)
            )
        if v.importance is not None:
            changes["importance"] = v.importance
        if v.category != Category.UNSPECIFIED:
            changes["category"] = v.category
        if v.metadata or v.replace_metadata or v.remove_metadata_keys:
            meta = {} if v.replace_metadata else dict(memory.metadata)
            meta.update(v.metadata)
            for k in v.remove_metadata_keys:
                meta.pop(k, None)
            changes["metadata"] = dict(check_metadata(meta, p.limits))
        now = p.clock()
        if v.expires_at is not None:
            changes["expires_at"] = v.expires_at
        if v.clear_expires_at:
            changes["expires_at"] = None
        if not changes:
            raise InvalidArgument(
                "the update changes nothing: set text, importance, category, metadata or expiry"
            )
        meta_now = changes.get("metadata", memory.metadata)
        assert isinstance(meta_now, dict)
        if (
            "text" in changes
            and PROVENANCE_KEY not in v.metadata
            and meta_now.get(PROVENANCE_KEY) in TRUSTED_ASSERTERS
        ):
            # New words nobody vouched for: what a person said is no longer what it holds
            # (else a model's update of a user's memory could be promoted as the user's).
            changes["metadata"] = {**meta_now, PROVENANCE_KEY: "assistant"}
        vector = tokens = None
        if "text" in changes:
            vector, tokens = await self.embed_document(str(changes["text"]))
            # The memory may have been deleted while the model ran.
            memory = visible(p.store, access, v.id, p.clock())
        updated = replace(memory, updated_at=now, **changes)  # type: ignore[arg-type]
        updated = await p.store.replace(updated, vector, tokens)
        if p.store.get(updated.id) is None:
            raise NotFound(f"memory {updated.id} was deleted while it was being updated")
        return updated

    # -- Import --------------------------------------------------------------------------

    async def import_memory(self, access: Access, v: ValidImport) -> bool:
        """Store an exported memory, keeping its id, times and fields, re-embedded with
        this daemon's model. Returns False when it (or its text in its scope) exists.

        What a file says is not trusted: the importing agent owns every row, its summary
        is made from its text as a Store makes one (the file's is not kept); links and
        supersession are kept only towards memories of the same scope that the agent may
        read and write (others are dropped alike, whether they exist or not); an id taken
        by a memory the agent cannot read gets a fresh id. So an import reveals nothing of
        memories the agent cannot read, and changes none of them.
        """
        p = self.parts
        scope = v.scope
        wanted_id = v.id or str(uuid.uuid4())  # a row with only a text: made as Store makes one
        if self._seen_by(access, wanted_id) or (
            scope in access.read and self._exact_duplicate(scope, v.content_hash) is not None
        ):
            return False
        vector, tokens = await self.embed_document(v.text)
        if self._seen_by(access, wanted_id):
            return False
        memory_id = wanted_id if p.store.get(wanted_id) is None else str(uuid.uuid4())
        now = p.clock()
        linkable = {i for i in (*v.related_ids, v.supersedes) if self._linkable(access, scope, i)}
        imported = Memory(
            id=memory_id,
            agent_id=sys.intern(access.agent_id),
            scope=sys.intern(scope),
            text=v.text,
            # This daemon's own, never the file's: Recall shows a long memory by its
            # summary, and a file's could say anything its text does not (the text being
            # what Get, the vault, the review's hashes and the search read).
            summary=await self.summary(v.text),
            category=v.category,
            importance=v.importance,
            created_at=v.created_at or now,
            updated_at=v.updated_at or now,
            expires_at=v.expires_at,
            metadata=dict(v.metadata),
            content_hash=v.content_hash,
            access_count=v.access_count,
            last_accessed_at=v.last_accessed_at,
            related_ids=tuple(sorted(i for i in v.related_ids if i in linkable)),
            supersedes=v.supersedes if v.supersedes in linkable else "",
        )
        await p.store.add(imported, vector, tokens)
        # The memory that replaced this one may have been imported first (exports list
        # newest first): its ``supersedes`` was dropped then, so restore the chain now.
        newer = v.superseded_by
        if newer and self._linkable(access, scope, newer):
            current = p.store.get(newer)
            if current is not None and not current.supersedes:
                await p.store.replace(replace(current, supersedes=imported.id), None)
        return True

    def _seen_by(self, access: Access, memory_id: str) -> bool:
        found = self.parts.store.get(memory_id)
        return found is not None and found.scope in access.read

    def _linkable(self, access: Access, scope: str, memory_id: str) -> bool:
        """Whether an imported memory of ``scope`` may link to ``memory_id``: a memory of
        the same scope, which the caller may read and write."""
        if not memory_id or scope not in access.read or scope not in access.write:
            return False
        target = self.parts.store.get(memory_id)
        return target is not None and target.scope == scope

    # -- embedding -----------------------------------------------------------------------

    async def embed_document(self, text: str) -> tuple[np.ndarray, np.ndarray | None]:
        p = self.parts
        with tracing.span("embed", kind="document"):
            if p.limits.token_vectors:
                return await p.embedder.embed_document_with_tokens(text)
            return await p.embedder.embed_document(text), None
