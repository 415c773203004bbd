"""Idempotency keys claimed across daemons: a conditional insert that refuses the second.

Following (``storage.follow``) lets a Store on one daemon see a key another daemon's Store
committed before it; two Stores with one key on two daemons at the same instant (a client
that gave up on a slow daemon and retried on the next) would still both find the key
unused. So with several daemons a keyed Store, once its memory is written, claims the key
in the table ``<table>_claims`` with ``merge_insert(...).when_not_matched_insert_all()`` on
a column declared Lance's unenforced primary key: Lance then records the inserted keys in
the commit, and of two concurrent claims of one key the second conflicts, is retried
against the first and inserts nothing (measured with lancedb 0.40.0 / Lance 13: 10 of 10
rounds of two concurrent claims, one row each; without the primary key both inserted).
The loser reads the winner's memory id and answers with it (``core.ingest``).

A claim is the SHA-256 of agent and key (no quoting, fixed length). Claims only have to
outlive a client's retries: those older than ``CLAIM_DAYS`` go at the table's periodic
compaction (the memory's own row keeps the key for later lookups), which only the holder
of the store's maintenance lease runs, deleting only versions replaced ``keep_versions`` ago.
A claim that old (or older than ``lapse``, store.idempotency_days: a key answered DUPLICATE
or MERGED is free again after it) names nothing: the first claim after it replaces it. So a
lapsed key reused for other text is that text's, whether or not a compaction ran since (a
claim still naming the old answer made the loser delete the memory it had just stored and
answer DUPLICATE of unrelated text).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import lancedb
import pyarrow as pa

log = logging.getLogger(__name__)

PRIMARY_KEY = "lance-schema:unenforced-primary-key"
CLAIM_DAYS = 1
COMPACT_EVERY = 200  # claims by this daemon between compactions (one fragment each)
CLAIMS_SCHEMA = pa.schema(
    [
        pa.field("claim", pa.string(), nullable=False, metadata={PRIMARY_KEY: "true"}),
        pa.field("memory_id", pa.string(), nullable=False),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


class KeyClaims:
    def __init__(
        self,
        uri: str,
        table: str,
        storage_options: dict[str, str] | None = None,
        *,
        maintains: Callable[[], bool] = lambda: True,
        keep_versions: timedelta = timedelta(seconds=10),
        lapse: timedelta | None = None,
    ):
        """``maintains``: whether this daemon may compact and clean up now (the holder of
        the store's maintenance lease: ``LanceStore.maintains``); ``keep_versions``: how
        long a replaced version stays readable for the other daemons; ``lapse``: how long a
        keyed Store that created nothing replays its answer (store.idempotency_days, None:
        always): a claim older than it, or than ``CLAIM_DAYS``, names nothing."""
        self._maintains = maintains
        self._keep_versions = keep_versions
        days = timedelta(days=CLAIM_DAYS)
        self._lasts = days if lapse is None else min(days, lapse)
        # Every operation from the newest version: the claims of the other daemons.
        self._db = lancedb.connect(
            uri, storage_options=storage_options or None, read_consistency_interval=timedelta(0)
        )
        self._name = f"{table}_claims"
        self._table: Any = None
        self._lock = threading.Lock()
        self._claims = 0

    def claim(self, agent_id: str, key: str, memory_id: str) -> str:
        """Make ``memory_id`` the answer of ``key`` unless a Store (on any daemon) claimed
        it first; returns the memory id the key names. Blocks: run it off the event loop."""
        claim = hashlib.sha256(f"{agent_id}\x00{key}".encode()).hexdigest()
        row = pa.table(
            {"claim": [claim], "memory_id": [memory_id], "at": [datetime.now(UTC)]},
            schema=CLAIMS_SCHEMA,
        )
        with self._lock:
            if self._table is None:
                # exist_ok: another daemon may make it at the same moment.
                self._table = self._db.create_table(self._name, schema=CLAIMS_SCHEMA, exist_ok=True)
            table = self._table
            self._claims += 1
            compact = self._claims % COMPACT_EVERY == 0 and self._maintains()
        try:
            return self._claim(table, claim, row, memory_id)
        finally:
            if compact:
                self._compact(table)

    def _claim(self, table: Any, claim: str, row: pa.Table, memory_id: str) -> str:
        for _ in range(2):
            # Claims of other keys (here or on other daemons) commit side by side: Lance
            # rebases inserts of different keys onto each other.
            result = table.merge_insert("claim").when_not_matched_insert_all().execute(row)
            if result.num_inserted_rows == 1:
                return memory_id
            found = table.search().where(f"claim = '{claim}'").select(["memory_id", "at"])
            held = found.limit(1).to_arrow().to_pylist()
            if not held:  # deleted meanwhile (a compaction): claim it again
                continue
            if held[0]["at"] >= self._stale_before():
                return str(held[0]["memory_id"])
            # Lapsed: delete it (that one only: a fresh claim another daemon made since stays)
            # and claim again; of two daemons doing so at once, the second insert loses.
            table.delete(f"claim = '{claim}' AND {self._stale_filter()}")
        return memory_id  # (deleted and claimed again twice over: keep this Store's own)

    def _stale_before(self) -> datetime:
        # whole seconds, as the filter's literal has them (a claim that lapsed less than a
        # second ago still holds)
        return (datetime.now(UTC) - self._lasts).replace(microsecond=0)

    def _stale_filter(self) -> str:
        return f"at < TIMESTAMP '{self._stale_before().strftime('%Y-%m-%d %H:%M:%S')}'"

    def _compact(self, table: Any) -> None:
        try:
            table.delete(self._stale_filter())
            table.optimize(cleanup_older_than=self._keep_versions)
        except Exception as e:  # an optimisation: every claim is there either way
            log.warning("compacting the key claims failed (it runs again later): %s", e)
