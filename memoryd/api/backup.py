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

from google.protobuf.json_format import MessageToDict, ParseDict
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb

from memoryd.api import convert
from memoryd.core.records import Memory

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
    with (
        gzip.open(path, "rt", encoding="utf-8")
        if path.suffix == ".gz"
        else path.open(encoding="utf-8")
    ) as f:
        for line in f:
            if line.strip():
                yield convert.memory_from_pb(ParseDict(json.loads(line), pb.Memory()))
