"""The in-memory hot index: every memory, partitioned by scope, with its vector.

Each scope is a partition holding a contiguous float32 matrix of its vectors plus the
columns the filters need (category, expiry). A search scans only the partitions of the
scopes the caller may see: the access predicate is the set of partitions, applied before
any ranking, so another agent's rows are never scored. Deletes swap the last row into the
hole so matrices stay dense.

Not thread-safe: the daemon touches it from the event loop thread only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

import numpy as np

from memoryd.core.records import Candidates, Category, Memory
from memoryd.native import topk_dot, topk_scores
from memoryd.storage.lexical import Analyzer, LexicalPartition, bm25_all, bm25_rows, idf

_NO_EXPIRY = math.inf


class _Partition:
    def __init__(self, dim: int):
        self.dim = dim
        self.vectors = np.zeros((16, dim), dtype=np.float32)
        self.expires = np.full(16, _NO_EXPIRY, dtype=np.float64)
        self.category = np.zeros(16, dtype=np.int8)
        self.hidden = np.zeros(16, dtype=np.uint8)  # superseded: kept, never recalled
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.by_hash: dict[str, str] = {}
        self.lexical = LexicalPartition()

    def __len__(self) -> int:
        return len(self.ids)

    def _grow(self) -> None:
        cap = self.vectors.shape[0] * 2
        for name in ("vectors", "expires", "category", "hidden"):
            old = getattr(self, name)
            new = np.empty((cap, *old.shape[1:]), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def put(self, memory: Memory, vector: np.ndarray, terms: list[str] | None) -> None:
        """Insert or overwrite; ``terms`` None keeps the row's indexed terms (text unchanged)."""
        row = self.row_of.get(memory.id)
        if row is None:
            row = len(self.ids)
            if row == self.vectors.shape[0]:
                self._grow()
            self.ids.append(memory.id)
            self.row_of[memory.id] = row
        self.vectors[row] = vector
        self.expires[row] = memory.expires_at.timestamp() if memory.expires_at else _NO_EXPIRY
        self.category[row] = int(memory.category)
        if terms is not None:
            self.lexical.set(row, terms)
        if memory.content_hash:
            self.by_hash[memory.content_hash] = memory.id

    def remove(self, memory: Memory) -> None:
        row = self.row_of.pop(memory.id)
        self.lexical.move_last_into(row)
        last = len(self.ids) - 1
        if row != last:
            moved = self.ids[last]
            self.ids[row] = moved
            self.row_of[moved] = row
            self.vectors[row] = self.vectors[last]
            self.expires[row] = self.expires[last]
            self.category[row] = self.category[last]
            self.hidden[row] = self.hidden[last]
        self.ids.pop()
        if self.by_hash.get(memory.content_hash) == memory.id:
            del self.by_hash[memory.content_hash]

    def mask(self, now_ts: float, categories: frozenset[Category]) -> np.ndarray:
        n = len(self.ids)
        keep = (self.expires[:n] > now_ts) & (self.hidden[:n] == 0)
        if categories:
            keep &= np.isin(self.category[:n], np.array([int(c) for c in categories]))
        return keep.astype(np.uint8)

    def nbytes(self) -> int:
        return self.vectors.nbytes + self.expires.nbytes + self.category.nbytes + self.hidden.nbytes


class HotIndex:
    def __init__(self, dim: int, analyzer: Analyzer | None = None):
        self.dim = dim
        self.analyzer = analyzer or Analyzer()
        self._parts: dict[str, _Partition] = {}
        self._memories: dict[str, Memory] = {}
        self._idempotency: dict[tuple[str, str], str] = {}
        self._tokens: dict[str, np.ndarray] = {}  # int8 token vectors (late interaction)
        self._text_bytes = 0
        # Links are stored one way (the newer memory names the older); the other direction
        # is derived here, so linking or superseding costs no extra write.
        self._forward: dict[str, set[str]] = {}
        self._backlinks: dict[str, set[str]] = {}
        self._supersedes: dict[str, str] = {}  # new id -> the id it replaced
        self._superseded_by: dict[str, str] = {}  # replaced id -> the new id

    def __len__(self) -> int:
        return len(self._memories)

    def put(self, memory: Memory, vector: np.ndarray, tokens: np.ndarray | None = None) -> None:
        """Insert or overwrite (same id; the scope never changes)."""
        if tokens is None:
            self._tokens.pop(memory.id, None)
        else:
            self._tokens[memory.id] = tokens
        old = self._memories.get(memory.id)
        same_text = old is not None and old.text == memory.text
        terms = None if same_text else self.analyzer.terms(memory.text)
        if old is not None:
            self._text_bytes -= len(old.text) + len(old.summary)
            old_part = self._parts[old.scope]
            if old_part.by_hash.get(old.content_hash) == old.id:
                del old_part.by_hash[old.content_hash]
        part = self._parts.get(memory.scope) or self._parts.setdefault(
            memory.scope, _Partition(self.dim)
        )
        part.put(memory, vector, terms)
        self._memories[memory.id] = memory
        self._text_bytes += len(memory.text) + len(memory.summary)
        if memory.idempotency_key:
            self._idempotency[(memory.agent_id, memory.idempotency_key)] = memory.id
        affected = self._unlink(memory.id) | self._link(memory)
        for memory_id in affected | {memory.id}:
            self._refresh(memory_id)

    def _link(self, memory: Memory) -> set[str]:
        forward = set(memory.related_ids) - {memory.id}
        self._forward[memory.id] = forward
        for target in forward:
            self._backlinks.setdefault(target, set()).add(memory.id)
        affected = set(forward)
        if memory.supersedes:
            self._supersedes[memory.id] = memory.supersedes
            self._superseded_by[memory.supersedes] = memory.id
            affected.add(memory.supersedes)
        return affected

    def _unlink(self, memory_id: str) -> set[str]:
        forward = self._forward.pop(memory_id, set())
        for target in forward:
            sources = self._backlinks.get(target)
            if sources is not None:
                sources.discard(memory_id)
                if not sources:
                    del self._backlinks[target]
        affected = set(forward)
        replaced = self._supersedes.pop(memory_id, "")
        if replaced and self._superseded_by.get(replaced) == memory_id:
            del self._superseded_by[replaced]
            affected.add(replaced)
        return affected

    def _refresh(self, memory_id: str) -> None:
        """Recompute a memory's derived fields: both-way links, superseded_by, hidden."""
        memory = self._memories.get(memory_id)
        if memory is None:
            return
        links = self._forward.get(memory_id, set()) | self._backlinks.get(memory_id, set())
        memory.related_ids = sorted(i for i in links if i in self._memories)
        newer = self._superseded_by.get(memory_id, "")
        memory.superseded_by = newer if newer in self._memories else ""
        part = self._parts[memory.scope]
        part.hidden[part.row_of[memory_id]] = 1 if memory.superseded_by else 0

    def remove(self, memory_id: str) -> Memory | None:
        memory = self._memories.pop(memory_id, None)
        if memory is None:
            return None
        self._tokens.pop(memory_id, None)
        self._text_bytes -= len(memory.text) + len(memory.summary)
        part = self._parts[memory.scope]
        part.remove(memory)
        if not part:
            del self._parts[memory.scope]
        if memory.idempotency_key:
            self._idempotency.pop((memory.agent_id, memory.idempotency_key), None)
        affected = self._unlink(memory_id) | self._backlinks.pop(memory_id, set())
        for other in affected:
            self._refresh(other)
        return memory

    def get(self, memory_id: str) -> Memory | None:
        return self._memories.get(memory_id)

    def vector_of(self, memory_id: str) -> np.ndarray | None:
        memory = self._memories.get(memory_id)
        if memory is None:
            return None
        part = self._parts[memory.scope]
        return part.vectors[part.row_of[memory_id]].copy()

    def tokens_of(self, memory_id: str) -> np.ndarray | None:
        return self._tokens.get(memory_id)

    def find_by_hash(self, scope: str, content_hash: str) -> Memory | None:
        part = self._parts.get(scope)
        memory_id = part.by_hash.get(content_hash) if part else None
        return self._memories.get(memory_id) if memory_id else None

    def find_by_idempotency_key(self, agent_id: str, key: str) -> Memory | None:
        memory_id = self._idempotency.get((agent_id, key))
        return self._memories.get(memory_id) if memory_id else None

    def search(
        self,
        query: np.ndarray,
        scopes: Iterable[str],
        k: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[tuple[Memory, float]]:
        if k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32)
        now_ts = now.timestamp()
        found: list[tuple[float, str]] = []
        for scope in sorted(set(scopes)):
            part = self._parts.get(scope)
            if part is None or not part:
                continue
            n = len(part)
            idx, scores = topk_dot(part.vectors[:n], q, part.mask(now_ts, categories), k)
            found.extend((float(s), part.ids[int(i)]) for i, s in zip(idx, scores, strict=True))
        found.sort(key=lambda t: (-t[0], t[1]))
        return [(self._memories[i], s) for s, i in found[:k]]

    def candidates(
        self,
        query: np.ndarray,
        query_text: str,
        scopes: Iterable[str],
        pool: int,
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
        lexical: bool = True,
        vector: bool = True,
    ) -> Candidates:
        """Hybrid candidates: the union of the best ``pool`` by cosine and the best
        ``pool`` by BM25 over the scopes, each re-scored exactly on both legs."""
        q = np.ascontiguousarray(query, dtype=np.float32)
        now_ts = now.timestamp()
        parts = [p for s in sorted(set(scopes)) if (p := self._parts.get(s)) is not None and p]
        weights: dict[str, float] = {}
        if lexical and parts:
            n_docs = sum(len(p) for p in parts)
            avgdl = sum(p.lexical.total_len for p in parts) / n_docs
            for term, count in Counter(self.analyzer.terms(query_text)).items():
                df = sum(p.lexical.df(term) for p in parts)
                if df:
                    weights[term] = idf(df, n_docs) * count
        else:
            avgdl = 0.0
        vec_hits: list[tuple[float, int, int]] = []  # (score, part index, row)
        lex_hits: list[tuple[float, int, int]] = []
        masks = []
        for pi, part in enumerate(parts):
            n = len(part)
            mask = part.mask(now_ts, categories)
            masks.append(mask)
            if vector:
                idx, sc = topk_dot(part.vectors[:n], q, mask, pool)
                vec_hits += [(float(s), pi, int(r)) for r, s in zip(idx, sc, strict=True)]
            if weights:
                scores = bm25_all(part.lexical, weights, avgdl)
                idx, sc = topk_scores(scores, mask & (scores > 0), pool)
                lex_hits += [(float(s), pi, int(r)) for r, s in zip(idx, sc, strict=True)]
        chosen: dict[tuple[int, int], None] = {}
        for hits in (vec_hits, lex_hits):
            hits.sort(key=lambda h: (-h[0], h[1], h[2]))
            for _, pi, row in hits[:pool]:
                chosen[(pi, row)] = None
        keys = list(chosen)
        n = len(keys)
        vectors = np.empty((n, self.dim), dtype=np.float32)
        lex = np.zeros(n, dtype=np.float32)
        memories = []
        for i, (pi, row) in enumerate(keys):
            part = parts[pi]
            vectors[i] = part.vectors[row]
            memories.append(self._memories[part.ids[row]])
        if weights:
            by_part: dict[int, list[int]] = {}
            for i, (pi, _) in enumerate(keys):
                by_part.setdefault(pi, []).append(i)
            for pi, positions in by_part.items():
                rows = [keys[i][1] for i in positions]
                lex[positions] = bm25_rows(parts[pi].lexical, rows, weights, avgdl)
        vec = vectors @ q if n else np.zeros(0, dtype=np.float32)
        return Candidates(
            memories=memories,
            vector_scores=vec.astype(np.float32),
            lexical_scores=lex,
            vector_rank=_ranks(vec, np.full(n, vector, dtype=bool)),
            lexical_rank=_ranks(lex, lex > 0),
            vectors=vectors,
        )

    def visible(
        self,
        scopes: Iterable[str],
        *,
        now: datetime,
        categories: frozenset[Category] = frozenset(),
    ) -> list[Memory]:
        out = []
        for scope in set(scopes):
            part = self._parts.get(scope)
            if part is None:
                continue
            for memory_id in part.ids:
                m = self._memories[memory_id]
                if m.is_expired(now) or (categories and m.category not in categories):
                    continue
                out.append(m)
        out.sort(key=lambda m: (m.created_at, m.id), reverse=True)
        return out

    def count_expired(self, scopes: Iterable[str], *, now: datetime) -> int:
        now_ts = now.timestamp()
        total = 0
        for scope in set(scopes):
            part = self._parts.get(scope)
            if part is not None:
                total += int((part.expires[: len(part)] <= now_ts).sum())
        return total

    def expired_ids(self, *, now: datetime) -> list[str]:
        now_ts = now.timestamp()
        out: list[str] = []
        for part in self._parts.values():
            rows = np.nonzero(part.expires[: len(part)] <= now_ts)[0]
            out.extend(part.ids[int(r)] for r in rows)
        return out

    def scope_sizes(self) -> dict[str, int]:
        return {scope: len(part) for scope, part in self._parts.items()}

    def nbytes(self) -> int:
        # Vectors and columns exactly; records approximately (text plus a fixed overhead).
        tokens = sum(t.nbytes for t in self._tokens.values())
        parts = sum(p.nbytes() for p in self._parts.values())
        return parts + tokens + self._text_bytes + 400 * len(self)


def _ranks(scores: np.ndarray, present: np.ndarray) -> np.ndarray:
    """0-based rank by score desc (ties by position) where present, else -1."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    out = np.full(len(scores), -1, dtype=np.int64)
    kept = order[present[order]]
    out[kept] = np.arange(len(kept))
    return out
