"""The conflict log as a JSONL file (one conflict per line, appended and flushed).

The file keeps each entry with the texts as they were (an audit trail), the newest
``max_bytes`` to twice that of them: once the file would pass ``max_bytes`` it becomes
``conflicts.jsonl.1`` (replacing the one before) and a new file begins, so a tenant whose
Stores log many conflicts cannot fill the disk, or make the start-up, which reads both files
back, take ever longer. In memory, for
ListConflicts and Review, each scope keeps its newest ``per_scope`` entries, and all scopes
together at most ``keep_in_memory``: past that, the scope holding the most loses its oldest.
So a tenant whose Stores log many conflicts (each Store may log several) pushes out its
own entries, never those of a scope that logs few. Entries in memory carry no texts:
ListConflicts shows the memories' texts as they are now, never the log's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Collection
from datetime import datetime
from operator import attrgetter
from pathlib import Path

from memoryd.core.records import Category, Conflict

log = logging.getLogger(__name__)

MAX_BYTES = 64 << 20  # the file's size before it rotates (see above)
PER_SCOPE = 1000  # entries kept in memory per scope (ListConflicts shows at most 1000)
KEEP_IN_MEMORY = 100_000  # ... and in all


class JsonlConflictLog:
    def __init__(
        self,
        path: Path,
        keep_in_memory: int = KEEP_IN_MEMORY,
        per_scope: int = PER_SCOPE,
        max_bytes: int = MAX_BYTES,
    ):
        self.path = path
        self.older = path.with_name(path.name + ".1")  # the file before, once rotated
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._keep = keep_in_memory
        self._per_scope = per_scope
        self._by_scope: dict[str, deque[Conflict]] = {}
        # The scopes by how many entries each holds (each size's in the order they came to
        # it), and the most any holds: the fullest is found at once, never by a walk over
        # every scope per entry (quadratic with many scopes, and the file is read back at
        # start-up: 130,000 entries of as many scopes took minutes).
        self._of_size: dict[int, dict[str, None]] = {}
        self._largest = 0
        self._held = 0
        for file in (self.older, path):
            if file.exists():
                self._read(file)
        self._bytes = path.stat().st_size if path.exists() else 0
        # A crash mid-append leaves the last line torn (no newline): the next entry begins
        # a line of its own, or it would be glued to the torn one and lost with it.
        self._torn = self._bytes > 0 and not _ends_a_line(path)

    def _read(self, file: Path) -> None:
        with file.open(encoding="utf-8") as f:
            for line in f:
                try:
                    self._hold(_decode(json.loads(line)))
                except (ValueError, KeyError, TypeError):
                    log.warning("skipping an unreadable line in %s", file)

    def append(self, conflict: Conflict) -> None:
        line = (json.dumps(_encode(conflict), ensure_ascii=False) + "\n").encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._bytes and self._bytes + len(line) > self._max_bytes:
                # (a file removed under the daemon, to free its space, is begun again)
                with contextlib.suppress(FileNotFoundError):
                    os.replace(self.path, self.older)
                self._bytes = 0
                self._torn = False
            if self._torn:
                line = b"\n" + line
            try:
                with self.path.open("ab") as f:
                    f.write(line)
            except BaseException:
                self._torn = True  # (part of it may have been written: a disk full)
                raise
            self._bytes += len(line)
            self._torn = False
            self._hold(conflict)

    def _hold(self, conflict: Conflict) -> None:
        entry = dataclasses.replace(conflict, new_text="", existing_text="")
        scope = entry.scope
        kept = self._by_scope.get(scope)
        if kept is None:
            kept = self._by_scope[scope] = deque()
        kept.append(entry)
        self._held += 1
        self._resized(scope, len(kept) - 1)
        if len(kept) > self._per_scope:
            self._drop_oldest(scope)
        if self._held > self._keep:
            self._drop_oldest(next(iter(self._of_size[self._largest])))

    def _drop_oldest(self, scope: str) -> None:
        kept = self._by_scope[scope]
        kept.popleft()
        self._held -= 1
        if not kept:
            del self._by_scope[scope]
        self._resized(scope, len(kept) + 1)

    def _resized(self, scope: str, was: int) -> None:
        """``scope`` held ``was`` entries and now holds one more or one fewer."""
        now = len(self._by_scope.get(scope, ()))
        if was:
            sized = self._of_size[was]
            del sized[scope]
            if not sized:
                del self._of_size[was]
        if now:
            self._of_size.setdefault(now, {})[scope] = None
        if now > self._largest:
            self._largest = now
        elif was == self._largest and was not in self._of_size:
            self._largest = now  # (the fullest lost one: none holds more than it now does)

    def recent(self, limit: int, scopes: Collection[str] | None = None) -> list[Conflict]:
        """The newest ``limit`` entries, newest first (without their texts), of those
        logged for a new memory in one of ``scopes`` (None: any) whose existing memory was
        in one of them too."""
        with self._lock:
            # Each scope's newest first: entries logged at one time (one Store's) stay
            # newest first through the sort, which keeps the order of equal times.
            if scopes is None:
                kept = [e for q in self._by_scope.values() for e in reversed(q)]
            else:
                kept = [
                    e
                    for scope in set(scopes)
                    for e in reversed(self._by_scope.get(scope, ()))
                    if e.existing_scope in scopes
                ]
        kept.sort(key=_AT, reverse=True)
        return kept[:limit]


_AT = attrgetter("at")


def _ends_a_line(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


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
