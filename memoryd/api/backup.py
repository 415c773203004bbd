"""Backups: every memory of the store as gzipped JSONL (one ``memoryd.v1.Memory`` in proto
JSON per line, the format of ``memoryd ctl export``), written on a schedule, keeping the
newest ``keep`` files. ``memoryd restore FILE --data-dir DIR`` reads one back into an empty
store (re-embedding every text), so a backup also survives a change of model."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb

from memoryd.api import convert
from memoryd.core.errors import DataCorrupt, InvalidArgument
from memoryd.core.policy import validate_agent_id, validate_scope
from memoryd.core.records import Memory
from memoryd.core.validate import check_memory_id

log = logging.getLogger(__name__)

PREFIX = "memoryd-backup-"
SUFFIX = ".jsonl.gz"


def write_backup(memories: Iterable[Memory], directory: Path, keep: int, now: datetime) -> Path:
    """Write one backup file (atomically: a temp file renamed) and prune old ones."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{PREFIX}{now.astimezone(UTC):%Y%m%dT%H%M%SZ}{SUFFIX}"
    final = directory / name
    partial = directory / (name + ".partial")
    count = 0
    with gzip.open(partial, "wt", encoding="utf-8") as f:
        for memory in memories:
            data = MessageToDict(convert.memory_to_pb(memory), preserving_proto_field_name=True)
            f.write(json.dumps(data, ensure_ascii=False) + "\n")
            count += 1
    partial.replace(final)
    for old in backups(directory)[:-keep]:
        old.unlink(missing_ok=True)
    log.info("backup of %d memories written to %s", count, final)
    return final


def backups(directory: Path) -> list[Path]:
    """Backup files in the directory, oldest first."""
    return sorted(directory.glob(f"{PREFIX}*{SUFFIX}"))


def read_backup(path: Path) -> Iterator[Memory]:
    """The memories of a backup (or ``ctl export``) file; a file that is not one raises
    ``DataCorrupt`` naming the file and line."""
    number = 0
    try:
        with (
            gzip.open(path, "rt", encoding="utf-8")
            if path.suffix == ".gz"
            else path.open(encoding="utf-8")
        ) as f:
            for number, line in enumerate(f, start=1):
                if line.strip():
                    yield _backup_row(ParseDict(json.loads(line), pb.Memory()), path, number)
    except (ValueError, ParseError, OSError, EOFError) as e:  # JSON, UTF-8, gzip, a field
        where = f"{path} line {number}" if number else str(path)
        raise DataCorrupt(
            f"{where}: not a memoryd backup (one memoryd.v1.Memory as JSON per line, as "
            f"`ctl export` writes): {str(e).splitlines()[0][:200]}"
        ) from e


def _backup_row(row: pb.Memory, path: Path, number: int) -> Memory:
    """A row names the memory it restores: a UUID, its owner and its scope."""
    if not (row.id and row.agent_id and row.scope):
        raise DataCorrupt(
            f"{path} line {number}: a backup row names its id, agent_id and scope; rows with "
            "only text go in with `memoryd ctl import AGENT FILE`, which makes them"
        )
    try:
        check_memory_id(row.id)
        validate_agent_id(row.agent_id)
        validate_scope(row.scope)
    except InvalidArgument as e:
        raise DataCorrupt(f"{path} line {number}: {e}") from None
    return convert.memory_from_pb(row)
