"""The text index's map: what lets a start take every partition's BM25 postings as they were
instead of analysing every stored text again.

Loading the hot index analyses each memory's text (words, stop words, stems: ``lexical``)
and puts its terms into its partition's postings: more than half of a start at a million
memories (bench/RESULTS.md). Whenever the repository saves the token file's map
(``token_map``: at a clean shutdown, and while serving once rows changed), it also writes
``tokens.bin.terms`` beside it: the term table once, then every partition's postings as
they are ((row, tf) pairs), partitions and rows in the order the token map lists its rows;
written atomically and ending in the SHA-256 of everything before it, like the map. While
serving they are copied a slice at a time (``Gathering``), the loop serving in between;
a partition whose postings changed since the token map's rows were taken is saved
without them (its rows counted, its index listed in the header's ``skipped``), and a
start analyses that scope's texts.

The token map vouches for the rows: a start uses this file only when it reuses the token
file with that map, and only when:

- it reads whole and names that map (the map's SHA-256, in its header);
- its texts were analysed the way this daemon analyses them (``Analyzer.fingerprint``: the
  analysing code, the stemmers', stop-word lists' and language detector's versions, the
  default language);
- a sample of rows analysed afresh has exactly the terms the file gives them.

Each saved partition's terms go to the rows the start took from the map (the rows as the
table has them now); the pairs of rows changed or gone since are dropped, and the rows
written or changed since are analysed (``LexicalPartition.adopt``). Anything else (and any
partition that does not fit) is analysed as a start without it. The file stays while its map does
and the start took it (a start after a crash takes it again); otherwise the start deletes
it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.storage.lexical import LexicalPartition
from memoryd.storage.token_map import (
    Unusable,
    column_bytes,
    encode_strings,
    read_framed,
    strings,
    write_framed,
)

log = logging.getLogger(__name__)

FORMAT = 2  # 1: no partition skipped (still read)
_MAGIC = b"MTRMAP01"
# per partition: rows, postings; per posting: term (index in the table), pairs; the pairs;
# per term: UTF-8 length (then the terms' bytes)
_COLUMNS = ("<i8", "<i8", "<u4", "<u4", "<i4", "<u4")


def terms_path(token_path: Path) -> Path:
    return token_path.with_name(token_path.name + ".terms")


@dataclass(slots=True)
class TermMap:
    terms: list[str]  # the term table
    part_rows: np.ndarray  # int64: each partition's rows (token-map order)
    part_postings: np.ndarray  # int64: how many postings each partition has
    posting_term: np.ndarray  # uint32: each posting's term (index into terms)
    posting_pairs: np.ndarray  # uint32: each posting's (row, tf) pair count
    pairs: np.ndarray  # int32: every posting's pairs, interleaved row, tf
    # "map": the token map's SHA-256 (hex); "analysis": Analyzer.fingerprint
    header: dict[str, Any] = field(default_factory=dict)
    # the partitions saved without their postings (changed while they were copied)
    skipped: frozenset[int] = frozenset()

    def partitions(self) -> list[tuple[int, list[str], np.ndarray, np.ndarray]]:
        """Per partition: its row count, its postings' terms and pair counts, its pairs."""
        out = []
        posting = pair = 0
        for rows, postings in zip(
            self.part_rows.tolist(), self.part_postings.tolist(), strict=True
        ):
            counts = self.posting_pairs[posting : posting + postings].astype(np.int64)
            words = [
                self.terms[t] for t in self.posting_term[posting : posting + postings].tolist()
            ]
            n = 2 * int(counts.sum())
            out.append((rows, words, counts, self.pairs[pair : pair + n]))
            posting += postings
            pair += n
        return out


def gather(parts: list[LexicalPartition]) -> TermMap:
    """The postings of ``parts`` (in token-map order), copied as they are now: call it
    where nothing changes the index."""
    gathering = Gathering()
    for lexical in parts:
        for _ in gathering.add(lexical):
            pass
    return gathering.result()


class Gathering:
    """``gather`` a little at a time, for a save while serving (``Repository``): ``add``
    copies a partition's postings, yielding every ``every`` postings or ``every_bytes`` of
    their pairs (a long posting copied in pieces) so that the caller can let the event
    loop run (and must then check that nothing changed the index, else drop what it
    gathered); ``result`` (anywhere: the copies are its own) joins them."""

    def __init__(self) -> None:
        self._table: dict[str, int] = {}
        self._part_rows: list[int] = []
        self._part_postings: list[int] = []
        self._posting_term: list[int] = []
        self._posting_pairs: list[int] = []
        self._chunks: list[bytes] = []
        self._done = 0  # postings copied so far, over every partition
        self._skipped: list[int] = []
        self._mark = 0  # where the last partition's postings start
        self._chunk_mark = 0  # ... and its chunks
        self._pairs: np.ndarray | None = None  # the chunks joined (``join``)

    def add(
        self, lexical: LexicalPartition, every: int = 0, every_bytes: int = 0
    ) -> Iterator[None]:
        table, chunks = self._table, self._chunks
        self._mark, self._chunk_mark = len(self._posting_term), len(chunks)
        self._part_rows.append(len(lexical))
        self._part_postings.append(len(lexical.postings))
        budget = every_bytes
        for term, posting in lexical.postings.items():
            index = table.get(term)
            if index is None:
                index = table[term] = len(table)
            self._posting_term.append(index)
            self._posting_pairs.append(len(posting) >> 1)
            size = len(posting) * posting.itemsize
            if every_bytes and size > budget:  # in pieces, the loop let run between them
                step = max(1, every_bytes // posting.itemsize)
                for at in range(0, len(posting), step):
                    # (no view of the array held across a yield: the loop may grow it)
                    with memoryview(posting) as view, view[at : at + step] as piece:
                        chunks.append(piece.tobytes())
                        budget -= piece.nbytes
                    if budget <= 0:
                        budget = every_bytes
                        yield
            else:
                chunks.append(posting.tobytes())
                budget -= size
            self._done += 1
            if (every and self._done % every == 0) or (every_bytes and budget <= 0):
                budget = every_bytes
                yield

    def skip(self, rows: int) -> None:
        """The next partition, of ``rows`` rows when the token map's were taken, changed
        since: saved without its postings."""
        self._skipped.append(len(self._part_rows))
        self._part_rows.append(rows)
        self._part_postings.append(0)

    def drop_last(self, rows: int) -> None:
        """The partition ``add`` copied last changed while it was copied: its postings go
        (``skip``; the terms only it named stay in the table, unused)."""
        del self._posting_term[self._mark :], self._posting_pairs[self._mark :]
        del self._chunks[self._chunk_mark :]
        self._part_rows.pop()
        self._part_postings.pop()
        self.skip(rows)

    def join(self, every_bytes: int = 0) -> Iterator[None]:
        """Join the pairs copied into one array (each chunk let go once copied), yielding
        every ``every_bytes`` so that the caller can let the event loop run: done on a
        thread, this was ~0.1 s of work holding the GIL at a million rows, and every
        request beside it waited for the GIL at each turn. ``result`` takes the array."""
        chunks = self._chunks
        pairs = np.empty(sum(map(len, chunks)) // 4, dtype=np.int32)
        at, budget = 0, every_bytes
        for i, chunk in enumerate(chunks):
            n = len(chunk) // 4
            pairs[at : at + n] = np.frombuffer(chunk, dtype=np.int32)
            at += n
            chunks[i] = b""
            budget -= len(chunk)
            if every_bytes and budget <= 0:
                budget = every_bytes
                yield
        self._chunks, self._pairs = [], pairs

    def result(self) -> TermMap:
        if self._pairs is None:
            for _ in self.join():
                pass
        pairs = self._pairs
        assert pairs is not None
        return TermMap(
            list(self._table),
            np.array(self._part_rows, dtype=np.int64),
            np.array(self._part_postings, dtype=np.int64),
            np.array(self._posting_term, dtype=np.uint32),
            np.array(self._posting_pairs, dtype=np.uint32),
            pairs,
            skipped=frozenset(self._skipped),
        )


def write(path: Path, saved: TermMap) -> None:
    """Write ``saved`` to ``path`` atomically and durably (``token_map.write_framed``)."""
    terms, lengths = encode_strings(saved.terms)
    header = {
        **saved.header,
        "format": FORMAT,
        "skipped": sorted(saved.skipped),
        "parts": len(saved.part_rows),
        "postings": len(saved.posting_term),
        "pairs": len(saved.pairs) // 2,
        "terms": len(saved.terms),
    }
    columns = (
        saved.part_rows,
        saved.part_postings,
        saved.posting_term,
        saved.posting_pairs,
        saved.pairs,  # (not copied: the pairs of every posting, ~100 MB at a million rows)
        lengths,
    )
    write_framed(path, _MAGIC, header, [*column_bytes(columns, _COLUMNS), *terms])


def read(path: Path) -> TermMap:
    """The saved postings at ``path``; ``Unusable`` if there are none or they do not read
    whole."""
    header, body, at, _ = read_framed(
        path, _MAGIC, (1, FORMAT), "the saved postings", "no saved postings"
    )
    try:
        counts = (
            int(header["parts"]),
            int(header["parts"]),
            int(header["postings"]),
            int(header["postings"]),
            2 * int(header["pairs"]),
            int(header["terms"]),
        )
        columns = []
        for dtype, n in zip(_COLUMNS, counts, strict=True):
            columns.append(np.frombuffer(body, dtype, n, at))
            at += np.dtype(dtype).itemsize * n
        terms = strings(body, at, columns.pop(), "the saved terms")
        part_rows, part_postings, posting_term, posting_pairs, pairs = columns
        if (part_rows < 0).any() or (part_postings < 0).any():
            raise Unusable("the saved postings' counts are negative")
        if int(part_postings.sum()) != len(posting_term) or int(
            posting_pairs.sum(dtype=np.int64)
        ) * 2 != len(pairs):
            raise Unusable("the saved postings do not add up")
        if len(posting_term) and int(posting_term.max()) >= len(terms):
            raise Unusable("a saved posting names a term the table does not have")
        listed = header.get("skipped", []) if header.get("format") == FORMAT else []
        if not isinstance(listed, list) or any(
            type(i) is not int or not 0 <= i < len(part_rows) or part_postings[i] for i in listed
        ):
            raise Unusable("the partitions saved without their postings are not listed right")
        skipped = frozenset(listed)
        if len(skipped) != len(listed):
            raise Unusable("the partitions saved without their postings are not listed right")
        return TermMap(
            terms,
            part_rows,
            part_postings,
            posting_term,
            posting_pairs,
            pairs,
            header=header,
            skipped=skipped,
        )
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError) as e:
        raise Unusable(f"the saved postings do not parse ({e})") from None


def remove(path: Path) -> None:
    """Delete the file (and a temporary one a failed save left)."""
    for p in (path, path.with_name(path.name + ".tmp")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:  # a directory there, say: left alone, never taken (read refuses it)
            log.warning("could not remove %s: %s", p, e)
