"""Host hooks: the before-prompt context block and the after-turn capture.

``build_context`` decides whether a prompt deserves a memory search (context rules),
recalls within a time budget, and renders the escaped ``<relevant-memories>`` block; a
gateway never waits longer than the budget: past it, it gets an empty block and a reason.
``capture`` applies the capture rules to a turn's messages, stores what passes (through
the same path as Store, so duplicates, injection checks and isolation all apply) and
reports a decision per message.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from memoryd.core.capture import CaptureConfig, plan_capture
from memoryd.core.context import ContextConfig, format_context_block, recall_query, skip_reason
from memoryd.core.errors import InvalidArgument, MemorydError
from memoryd.core.records import Category, Memory, ScoredMemory, StoreOutcome
from memoryd.core.service import MemoryService, NewMemory, RecallQuery

log = logging.getLogger(__name__)

MAX_SESSION_ID_CHARS = 256
# A Capture's key gets ":<message index>" per stored message (a turn has at most 1000).
CAPTURE_KEY_SUFFIX_CHARS = 4


@dataclass(frozen=True, slots=True)
class HookSettings:
    context: ContextConfig = field(default_factory=ContextConfig)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    time_budget_ms: float = 800.0
    max_sessions: int = 10_000  # sessions whose recent captures are remembered for dedupe


@dataclass(frozen=True, slots=True)
class ContextResult:
    context: str
    results: list[ScoredMemory]
    skipped_reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    index: int
    captured: bool
    reason: str
    detail: str = ""
    memory_id: str = ""


@dataclass(frozen=True, slots=True)
class CaptureResult:
    captured: list[Memory]
    decisions: list[Decision]


class HookService:
    def __init__(self, memories: MemoryService, settings: HookSettings | None = None):
        self.memories = memories
        self.settings = settings or HookSettings()
        self._recent: OrderedDict[tuple[str, str], deque[str]] = OrderedDict()

    async def build_context(
        self,
        agent_id: str,
        session_id: str,
        prompt: str,
        *,
        max_results: int = 0,
        min_score: float = 0.0,
        time_budget_ms: int = 0,
        scopes: tuple[str, ...] = (),
        time: Mapping[str, Any] | None = None,
    ) -> ContextResult:
        """``time``: RecallQuery's time fields (created_after, created_before,
        reference_time, timezone) for the recall."""
        access = self.memories.access(agent_id)
        access.readable(scopes)  # an unreadable scope is an error, not an empty block
        _check_session(session_id)
        cfg = self.settings.context
        reason = skip_reason(prompt, cfg)
        if reason is not None:
            return ContextResult("", [], reason)
        limit = max_results or cfg.max_results
        floor = min_score or cfg.min_score
        budget = (time_budget_ms or self.settings.time_budget_ms) / 1000.0
        query = recall_query(prompt, cfg)
        recall = self.memories.recall(
            RecallQuery(
                agent_id=agent_id,
                query=query,
                limit=max(limit, cfg.overfetch),
                min_score=floor,
                scopes=scopes,
                **(time or {}),
            )
        )
        try:
            hits = await asyncio.wait_for(recall, timeout=budget)
        except TimeoutError:
            log.warning(
                "build_context for agent %s exceeded its %.0f ms budget", agent_id, budget * 1e3
            )
            return ContextResult("", [], "time_budget_exceeded")
        hits = hits[:limit]
        if not hits:
            return ContextResult("", [], "no_relevant_memories")
        block_cfg = replace(cfg, max_results=limit, min_score=floor)
        block = format_context_block(
            [(h.memory.text, h.memory.category, h.score, h.memory.created_at) for h in hits],
            block_cfg,
        )
        return ContextResult(block, hits, "" if block else "no_relevant_memories")

    async def capture(
        self,
        agent_id: str,
        session_id: str,
        messages: Sequence[tuple[str, str]],
        *,
        scope: str = "",
        idempotency_key: str = "",
    ) -> CaptureResult:
        access = self.memories.access(agent_id)
        _check_session(session_id)
        limit = self.memories.limits.max_idempotency_key_chars - CAPTURE_KEY_SUFFIX_CHARS
        if len(idempotency_key) > limit:
            raise InvalidArgument(
                f"idempotency_key is {len(idempotency_key)} chars; the limit for Capture is "
                f"{limit} (store.max_idempotency_key_chars less {CAPTURE_KEY_SUFFIX_CHARS}"
                " for the message index)"
            )
        if scope:
            access.check_write(scope)
        if len(messages) > 1000:
            raise InvalidArgument(f"a turn has {len(messages)} messages; the limit is 1000")
        key = (agent_id, session_id)
        recent = self._recent_for(key)
        plan = plan_capture(messages, list(recent), self.settings.capture)
        captured: list[Memory] = []
        decisions: list[Decision] = []
        for d in plan:
            if not d.captured:
                decisions.append(Decision(d.index, False, d.reason, d.detail))
                continue
            try:
                result = await self.memories.store_memory(
                    NewMemory(
                        agent_id=agent_id,
                        text=d.text,
                        category=d.category or Category.UNSPECIFIED,
                        scope=scope,
                        # One key per message: a repeat of the turn replays each answer.
                        idempotency_key=f"{idempotency_key}:{d.index}" if idempotency_key else "",
                        # Capture keeps user messages only: the provenance the review's
                        # trust rule reads (core/review.py).
                        metadata={
                            "source": "capture",
                            "session_id": session_id,
                            "asserted_by": "user",
                        },
                    )
                )
            except MemorydError as e:  # e.g. refused by the store's injection check
                decisions.append(Decision(d.index, False, "store_refused", str(e)))
                continue
            recent.append(d.text)
            if result.outcome == StoreOutcome.DUPLICATE:
                decisions.append(
                    Decision(d.index, False, "duplicate_existing", d.detail, result.memory.id)
                )
            else:
                captured.append(result.memory)
                decisions.append(Decision(d.index, True, "captured", d.detail, result.memory.id))
        return CaptureResult(captured, decisions)

    def _recent_for(self, key: tuple[str, str]) -> deque[str]:
        recent = self._recent.get(key)
        if recent is None:
            recent = self._recent[key] = deque(maxlen=self.settings.capture.recent_window)
            while len(self._recent) > self.settings.max_sessions:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(key)
        return recent


def _check_session(session_id: str) -> None:
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise InvalidArgument(
            f"session_id is {len(session_id)} chars; the limit is {MAX_SESSION_ID_CHARS}"
        )
