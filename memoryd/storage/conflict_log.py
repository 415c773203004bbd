"""The conflict log as a JSONL file (one conflict per line, appended and flushed)."""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from datetime import datetime
from pathlib import Path

from memoryd.core.records import Category, Conflict

log = logging.getLogger(__name__)


class JsonlConflictLog:
    def __init__(self, path: Path, keep_in_memory: int = 10_000):
        self.path = path
        self._lock = threading.Lock()
        self._recent: deque[Conflict] = deque(maxlen=keep_in_memory)
        if path.exists():
            with path.open(encoding="utf-8") as f:
                for line in f:
                    try:
                        self._recent.append(_decode(json.loads(line)))
                    except (ValueError, KeyError, TypeError):
                        log.warning("skipping an unreadable line in %s", path)

    def append(self, conflict: Conflict) -> None:
        line = json.dumps(_encode(conflict), ensure_ascii=False)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
            self._recent.append(conflict)

    def recent(self, limit: int) -> list[Conflict]:
        with self._lock:
            items = list(self._recent)
        return items[::-1][:limit]


def _encode(c: Conflict) -> dict[str, object]:
    return {
        "timestamp": c.at.isoformat(),
        "new_id": c.new_id,
        "existing_id": c.existing_id,
        "new_agent_id": c.new_agent_id,
        "existing_agent_id": c.existing_agent_id,
        "new_text": c.new_text,
        "existing_text": c.existing_text,
        "score": round(c.score, 6),
        "category": c.category.name.lower(),
        "merge_decision": c.merge_decision,
        "scope": c.scope,
        "existing_scope": c.existing_scope,
    }


def _decode(d: dict[str, object]) -> Conflict:
    return Conflict(
        at=datetime.fromisoformat(str(d["timestamp"])),
        new_id=str(d["new_id"]),
        existing_id=str(d["existing_id"]),
        new_agent_id=str(d["new_agent_id"]),
        existing_agent_id=str(d["existing_agent_id"]),
        new_text=str(d["new_text"]),
        existing_text=str(d["existing_text"]),
        score=float(d["score"]),  # type: ignore[arg-type]
        category=Category[str(d["category"]).upper()],
        merge_decision=str(d["merge_decision"]),
        scope=str(d["scope"]),
        existing_scope=str(d["existing_scope"]),
    )
