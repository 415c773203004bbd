"""LoCoMo retrieval benchmark through memoryd's gRPC API.

Every dialogue turn of each LoCoMo conversation is stored as a memory of one agent (one
agent per conversation: ten isolated agents), text "Speaker: utterance" with a shared
photo's caption appended, created_at = the session's date. Every question of categories
1-4 that names evidence is recalled through the gRPC API (top 10), once per retrieval
configuration (RecallOptions), judged against its evidence turns:

    recall@k  share of a question's evidence turns found in the top k, averaged
    MRR       1 / rank of the first evidence turn in the top 10 (0 if none), averaged

Recency and decay are judged as of one day after the conversation's last session (what
an agent in that conversation would see), via RecallOptions.as_of.

    python bench/locomo.py                          # every configuration, all questions
    python bench/locomo.py --configs vector,bm25,rrf --out bench/out/locomo.md

The dataset (CC BY-NC 4.0) is read from ../shared/datasets/locomo/locomo10.json or --data;
it is never copied into this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import harness
from google.protobuf.timestamp_pb2 import Timestamp
from memoryd_client import AsyncMemoryClient, pb

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json"
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
F = pb.FusionMode
R = pb.RerankMode

# name -> RecallOptions fields. "default" is whatever the daemon ships.
NONE = {"rerank": R.RERANK_MODE_NONE}
CONFIGS: dict[str, dict[str, object]] = {
    # what the daemon ships (weighted fusion + late-interaction rerank)
    "default": {},
    # single legs and fusions, no reranker
    "vector": {"fusion": F.FUSION_MODE_VECTOR_ONLY, "importance_weight": 0.0, **NONE},
    "bm25": {"fusion": F.FUSION_MODE_BM25_ONLY, "importance_weight": 0.0, **NONE},
    "rrf": {"fusion": F.FUSION_MODE_RRF, **NONE},
    "weighted-70-30": {"vector_weight": 0.7, "bm25_weight": 0.3, **NONE},
    "weighted-50-50": {**NONE},
    "weighted-40-60": {"vector_weight": 0.4, "bm25_weight": 0.6, **NONE},
    "weighted-scale-3": {"bm25_scale": 3.0, **NONE},
    "weighted-scale-7": {"bm25_scale": 7.0, **NONE},
    "pool-100": {"candidate_pool": 100},
    # rerank variants
    "late-interaction-0.3": {"rerank_weight": 0.3},
    "late-interaction-0.7": {"rerank_weight": 0.7},
    "rrf+late-interaction": {"fusion": F.FUSION_MODE_RRF},
    "cross-encoder": {"rerank": R.RERANK_MODE_CROSS_ENCODER},
    # ablations: each stage removed from / added to the default
    "-rerank": {**NONE},
    "-importance": {"importance_weight": 0.0},
    "+recency": {"recency_weight": 0.1},
    "+length": {"length_weight": 0.5},
    "+decay": {"decay_half_life_days": 60.0},
    "+mmr-0.9": {"mmr_lambda": 0.9},
    "+mmr-0.7": {"mmr_lambda": 0.7},
}
DEFAULT_CONFIGS = ",".join(CONFIGS)


def parse_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(raw: list[str]) -> set[str]:
    out = set()
    for item in raw:
        for m in re.finditer(r"D:?(\d+):(\d+)", item):
            out.add(f"D{m.group(1)}:{m.group(2)}")
    return out


@dataclass
class Turn:
    dia_id: str
    text: str
    when: datetime


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[tuple[str, int, set[str]]]
    last_date: datetime
    memory_to_dia: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    @property
    def agent(self) -> str:
        return f"locomo-{self.sample_id}".replace("_", "-")


def load(path: Path, limit: int | None) -> list[Conversation]:
    data = json.loads(path.read_text())
    out = []
    for sample in data[:limit]:
        conv = sample["conversation"]
        turns = []
        n = 1
        last = None
        while f"session_{n}" in conv:
            when = parse_date(conv[f"session_{n}_date_time"])
            last = when
            for t in conv[f"session_{n}"]:
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" [shares a photo: {t['blip_caption']}]"
                turns.append(Turn(t["dia_id"], text, when))
            n += 1
        questions = []
        for qa in sample["qa"]:
            ev = evidence_ids(qa.get("evidence", []))
            if qa["category"] in CATEGORY_NAMES and ev:
                questions.append((qa["question"], qa["category"], ev))
        assert last is not None
        out.append(Conversation(str(sample["sample_id"]), turns, questions, last))
    return out


def ts(value: datetime) -> Timestamp:
    t = Timestamp()
    t.FromDatetime(value)
    return t


async def ingest(client: AsyncMemoryClient, conv: Conversation) -> None:
    async def requests() -> AsyncIterator[pb.StreamRequest]:
        for i, turn in enumerate(conv.turns):
            yield pb.StreamRequest(
                request_id=str(i),
                store=pb.StoreRequest(
                    agent_id=conv.agent,
                    text=turn.text,
                    created_at=ts(turn.when),
                    category=pb.CATEGORY_OTHER,
                    metadata={"dia_id": turn.dia_id},
                ),
            )

    async for resp in client.stream(requests()):
        if resp.WhichOneof("result") != "store":
            raise SystemExit(f"store failed: {resp.error.code_name} {resp.error.message}")
        turn = conv.turns[int(resp.request_id)]
        conv.memory_to_dia[resp.store.memory.id].add(turn.dia_id)


@dataclass
class Scores:
    recall5: list[float] = field(default_factory=list)
    recall10: list[float] = field(default_factory=list)
    rr: list[float] = field(default_factory=list)

    def add(self, ranked: list[set[str]], evidence: set[str]) -> None:
        def found(k: int) -> float:
            got = set().union(*ranked[:k]) if ranked[:k] else set()
            return len(got & evidence) / len(evidence)

        self.recall5.append(found(5))
        self.recall10.append(found(10))
        rank = next((i + 1 for i, d in enumerate(ranked) if d & evidence), None)
        self.rr.append(1.0 / rank if rank else 0.0)

    def row(self) -> tuple[float, float, float]:
        return (
            statistics.fmean(self.recall5),
            statistics.fmean(self.recall10),
            statistics.fmean(self.rr),
        )


async def evaluate(
    client: AsyncMemoryClient, convs: list[Conversation], options: dict[str, object], parallel: int
) -> tuple[dict[int, Scores], Scores, list[float]]:
    per_cat: dict[int, Scores] = defaultdict(Scores)
    overall = Scores()
    latencies: list[float] = []
    gate = asyncio.Semaphore(parallel)

    async def one(conv: Conversation, question: str, cat: int, ev: set[str]) -> None:
        opts = pb.RecallOptions(as_of=ts(conv.last_date + timedelta(days=1)), **options)  # type: ignore[arg-type]
        async with gate:
            start = time.perf_counter()
            resp = await client.recall(conv.agent, question, limit=10, options=opts)
            latencies.append((time.perf_counter() - start) * 1000)
        ranked = [conv.memory_to_dia.get(h.memory.id, set()) for h in resp.results]
        per_cat[cat].add(ranked, ev)
        overall.add(ranked, ev)

    await asyncio.gather(*(one(c, q, cat, ev) for c in convs for q, cat, ev in c.questions))
    return per_cat, overall, latencies


async def sequential_latency(
    client: AsyncMemoryClient, conv: Conversation, options: dict[str, object], n: int
) -> list[float]:
    out = []
    for question, _, _ in (conv.questions * 3)[:n]:
        opts = pb.RecallOptions(as_of=ts(conv.last_date + timedelta(days=1)), **options)  # type: ignore[arg-type]
        start = time.perf_counter()
        await client.recall(conv.agent, question, limit=10, options=opts)
        out.append((time.perf_counter() - start) * 1000)
    return out


async def run(args: argparse.Namespace) -> None:
    convs = load(args.data, args.conversations)
    n_questions = sum(len(c.questions) for c in convs)
    print(
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{n_questions} questions (categories 1-4 with evidence)",
        file=sys.stderr,
    )
    async with AsyncMemoryClient(args.address, timeout=120.0) as client:
        t0 = time.perf_counter()
        for conv in convs:
            await ingest(client, conv)
        print(f"ingested in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        names = [n.strip() for n in args.configs.split(",") if n.strip()]
        lines = [
            "| config | recall@5 | recall@10 | MRR | "
            + " | ".join(f"{CATEGORY_NAMES[c]} R@10 / MRR" for c in sorted(CATEGORY_NAMES))
            + " | recall p50 ms (seq.) |",
            "|---" * (5 + len(CATEGORY_NAMES)) + "|",
        ]
        largest = max(convs, key=lambda c: len(c.turns))
        for name in names:
            options = dict(CONFIGS[name])
            per_cat, overall, _ = await evaluate(client, convs, options, args.parallel)
            seq = await sequential_latency(client, largest, options, args.latency_queries)
            r5, r10, mrr = overall.row()
            cats = " | ".join(
                f"{per_cat[c].row()[1]:.3f} / {per_cat[c].row()[2]:.3f}" for c in sorted(per_cat)
            )
            lines.append(
                f"| {name} | {r5:.3f} | {r10:.3f} | {mrr:.3f} | {cats} | "
                f"{statistics.median(seq):.2f} |"
            )
            print(lines[-1], file=sys.stderr)
    harness.write_table("\n".join(lines), args.out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    harness.add_quality_args(p)
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"comma list of {DEFAULT_CONFIGS}")
    p.add_argument("--conversations", type=int, help="only the first N conversations")
    p.add_argument("--parallel", type=int, default=8, help="recalls in flight while scoring")
    p.add_argument("--latency-queries", type=int, default=200, help="sequential recalls timed")
    args = p.parse_args()
    if not args.data.is_file():
        raise SystemExit(f"LoCoMo not found at {args.data}; pass --data PATH")
    with harness.daemon_unless(args.address, args.env) as args.address:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
