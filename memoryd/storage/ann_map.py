"""The approximate indexes' save: what lets a start serve a large scope's HNSW graph again
in seconds instead of building it anew (about nine minutes for one scope of a million
rows on this machine's one build thread, during which that scope is scanned exactly).

Whenever the repository saves the token file's map (``token_map``: at a clean shutdown,
and while serving once rows or graphs changed: ``Repository.checkpoint_tokens``), it also
saves every serving graph of a large scope beside it:

- ``tokens.bin.ann.<i>``: the graph as faiss serialises it, streamed to the file with its
  SHA-256 taken on the way (no copy of it in memory: ~0.7 KB a row). A graph is never
  changed once serving, so each is written once, under a number no file there has; later
  saves name the same file again (``OnDisk``), and a graph built anew gets a new one;
- then ``tokens.bin.ann``, framed like the map (``token_map.write_framed``, ending in its
  own SHA-256): the map's SHA-256, what the graphs are (faiss's version, the index kind,
  dimension, M and efConstruction), and per graph where its partition's rows start in the
  map, its row count, each label's place in the map (-1: a dead label) and its file's name,
  size and SHA-256. It is written last: it vouches for the graph files, and the files it no
  longer names are deleted after it.

The token map vouches for the rows: a start uses a saved graph only when it reuses the
token file with the map this file names, and only this faiss and these settings. A label
stays live when its place's row is one the start took from the map (the row as the table
has it now, so its vector is the one the graph holds), and points at that row wherever it
is now; the labels of rows changed or gone since are dead, the rows written since are the
graph's tail, as after a build. The graph is checked (size, SHA-256) and parsed on a
thread while the daemon serves (the scope is scanned exactly until then). The files of the
graphs taken stay (a start after a crash takes them again); the others are deleted at the
start. Anything that does not fit, and any failure, leaves the scope to a build, as a
start without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
import threading
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from memoryd.storage.token_map import Unusable, read_framed, sync_dir, write_framed

log = logging.getLogger(__name__)

FORMAT = 1
_MAGIC = b"MANNMAP1"
KIND = "IndexHNSWSQ/QT_8bit/inner_product"
_CHUNK = 1 << 24  # bytes read at a time to check a graph file
_IO_BLOCK = 1 << 22  # faiss's reads and writes through Python, at most this many bytes each


def graphs_path(token_path: Path) -> Path:
    return token_path.with_name(token_path.name + ".ann")


def _graph_file(path: Path, i: int) -> Path:
    return path.with_name(f"{path.name}.{i}")


@dataclass(frozen=True, slots=True)
class SavedGraph:
    start: int  # where its partition's rows start in the token map
    rows: int  # the partition's rows when it was saved
    places: np.ndarray  # int64: each label's place in the token map (-1: dead)
    file: Path
    size: int  # the graph file's bytes
    sha256: str  # theirs (hex)


@dataclass(frozen=True, slots=True)
class OnDisk:
    """A graph file already written (by a save before, or read at the start): a later
    save names it again instead of writing the same graph anew."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ToSave:
    """One serving graph as the loop found it (``Repository``)."""

    start: int
    rows: int
    places: np.ndarray
    index: Any  # Callable[[float], faiss index | None], called only when not ``on_disk``
    on_disk: OnDisk | None = None


def describe(dim: int, m: int, ef_construction: int) -> dict[str, Any]:
    """What makes a saved graph this daemon's: faiss's version and the graph's settings."""
    import faiss

    return {
        "faiss": faiss.__version__,
        "kind": KIND,
        "dim": dim,
        "m": m,
        "ef_construction": ef_construction,
    }


def write(
    path: Path,
    map_digest: str,
    graphs: dict[str, Any],
    saves: list[ToSave],
    wait: float,
    number: int = 0,
) -> tuple[int, list[OnDisk | None], int]:
    """Write each graph's file that is not on disk yet (under a number no file there has,
    and ``number`` or more: the caller's next, so that a name is never given twice in one
    process, as a graph in memory may still name a file deleted since), then the file
    naming them all (``path``), then delete the graph files it does not name; returns the
    bytes written, per save its file (None: its index could not be had within ``wait``
    seconds, left out), and the next number. On failure the files it wrote do not stay."""
    import faiss

    entries: list[dict[str, Any]] = []
    sections: list[bytes] = []
    files: list[OnDisk | None] = []
    written: list[Path] = []
    total = 0
    number = max(number, next_number(path))
    try:
        for save in saves:
            on_disk = save.on_disk
            if on_disk is None or not _still(path.parent / on_disk.name, on_disk.size):
                index = save.index(wait)
                if index is None:
                    files.append(None)
                    continue
                target = _graph_file(path, number)
                number += 1
                on_disk = _write_graph(faiss, index, target)
                written.append(target)
                total += on_disk.size
            places = np.ascontiguousarray(save.places, dtype="<i8")
            entries.append(
                {
                    "start": save.start,
                    "rows": save.rows,
                    "labels": len(places),
                    "file": on_disk.name,
                    "size": on_disk.size,
                    "sha256": on_disk.sha256,
                }
            )
            sections.append(places.tobytes())
            files.append(on_disk)
        header = {"format": FORMAT, "map": map_digest, **graphs, "graphs": entries}
        write_framed(path, _MAGIC, header, sections)
        sync_dir(path.parent)
    except BaseException:
        for target in written:
            with contextlib.suppress(OSError):
                target.unlink()
        raise
    remove(path, keep={str(e["file"]) for e in entries} | {path.name})
    return total + sum(len(s) for s in sections), files, number


def _still(file: Path, size: int) -> bool:
    """Whether a graph file written before is there as it was written (its size: a file
    is never written twice under one name, see ``write``)."""
    try:
        found = file.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == size


def _write_graph(faiss: Any, index: Any, target: Path) -> OnDisk:
    tmp = target.with_name(target.name + ".tmp")
    digest = hashlib.sha256()
    size = 0
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:

        def put(data: bytes, f: IO[bytes] = f, digest: Any = digest) -> None:
            nonlocal size
            f.write(data)
            digest.update(data)
            size += len(data)

        faiss.write_index(index, faiss.PyCallbackIOWriter(put, _IO_BLOCK))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return OnDisk(target.name, size, digest.hexdigest())


def read(path: Path) -> tuple[dict[str, Any], list[SavedGraph]]:
    """The saved graphs' description; ``Unusable`` if there is none or it does not read
    whole. The graph files are not read here (``load``)."""
    header, body, at, _ = read_framed(
        path, _MAGIC, FORMAT, "the saved graphs", "no saved approximate index"
    )
    graphs: list[SavedGraph] = []
    try:
        for entry in header["graphs"]:
            labels = int(entry["labels"])
            places = np.frombuffer(body, "<i8", labels, at).astype(np.int64)
            at += 8 * labels
            name = str(entry["file"])
            if not _pattern(path).fullmatch(name) or name.endswith(".tmp") or name == path.name:
                raise ValueError(f"a graph file named {name!r}")
            graphs.append(
                SavedGraph(
                    int(entry["start"]),
                    int(entry["rows"]),
                    places,
                    path.with_name(name),
                    int(entry["size"]),
                    str(entry["sha256"]),
                )
            )
    except (ValueError, KeyError, TypeError) as e:
        raise Unusable(f"the saved graphs do not parse ({e})") from None
    if at != len(body):
        raise Unusable("the saved graphs' labels do not add up to the file's length")
    return header, graphs


def open_graph(graph: SavedGraph) -> IO[bytes]:
    """The graph's file, opened (not following a symlink, never a FIFO or a device), to be
    read by ``load`` after the file is deleted."""
    fd = os.open(graph.file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unusable(f"{graph.file.name} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def load(f: IO[bytes], graph: SavedGraph, dim: int, cancel: threading.Event) -> Any:
    """The faiss index in ``f`` once its size and SHA-256 are the saved ones (checked
    before faiss parses a byte of it). Closes ``f``. Runs on a thread; ``cancel`` (the
    index closed) ends it early."""
    import faiss

    with f:
        if os.fstat(f.fileno()).st_size != graph.size:
            raise Unusable(f"{graph.file.name} is not {graph.size} bytes")
        digest = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            if cancel.is_set():
                raise Unusable("the index was closed while its graph was read")
            digest.update(chunk)
        if digest.hexdigest() != graph.sha256:
            raise Unusable(f"the checksum of {graph.file.name} does not match")
        f.seek(0)
        index = faiss.read_index(faiss.PyCallbackIOReader(f.read, _IO_BLOCK))
        if f.tell() != graph.size:
            raise Unusable(f"{graph.file.name} holds more than its graph")
    if not isinstance(index, faiss.IndexHNSWSQ) or index.d != dim:
        raise Unusable(f"{graph.file.name} is not a {dim}-d graph of this kind")
    if index.ntotal != len(graph.places):
        raise Unusable(f"{graph.file.name} holds {index.ntotal} vectors, not {len(graph.places)}")
    return index


def next_number(path: Path) -> int:
    """A number above every graph file's in the directory (``write``'s ``number``, before
    the files are deleted: a graph in memory may still name one)."""
    return 1 + max((_number(name) for name in _names(path)), default=-1)


def _pattern(path: Path) -> re.Pattern[str]:
    return re.compile(re.escape(path.name) + r"(\.[0-9]+)?(\.tmp)?")


def _names(path: Path) -> list[str]:
    """The saved graphs' names in the directory (``remove``'s)."""
    names = _pattern(path)
    try:
        return [name for name in os.listdir(path.parent) if names.fullmatch(name)]
    except FileNotFoundError:
        return []


def _number(name: str) -> int:
    digits = name.removesuffix(".tmp").rpartition(".")[2]
    return int(digits) if digits.isdigit() else -1


def remove(path: Path, keep: Collection[str] = ()) -> None:
    """Delete the saved graphs but those named in ``keep``: the file naming them, their
    files, and what a failed save left (their temporary files); only those names
    (``tokens.bin.ann``, ``.ann.tmp``, ``.ann.<i>``, ``.ann.<i>.tmp``), and never a
    directory. What cannot be deleted is logged: a start never fails over it (a later
    start does not take a graph file the list does not name)."""
    removed = False
    for name in _names(path):
        if name in keep:
            continue
        try:
            os.unlink(path.parent / name)
            removed = True
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not delete %s: %s", path.parent / name, e)
    if removed:
        sync_dir(path.parent)
