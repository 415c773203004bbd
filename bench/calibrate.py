"""Score calibration: what the shipped model and pipeline score for a memory a query is
about, and for the best memory when the query is about nothing stored.

The floors of forget by query (``forget.*``) and of auto-recall (``hooks.min_score``) are
chosen from these distributions. Every query goes through Recall (limit 10, min_score 0,
``explain``) of a daemon with default settings; per query the script keeps the ranked
(id, final score, cosine) list and judges rules on it offline:

    preference set  short hand-written user memories, each with a question about it and
                    three forget-style queries (a few of its words, a paraphrase,
                    "forget that I ..."), in two stores: the memory alone in its agent (as
                    in the README's "Try it") and all of them together with 500 memories
                    of bench/corpus.py as background; queries about nothing stored
                    (questions and forget requests) against both
    similar pairs   two memories differing in one value, in one agent: a query naming
                    neither (nothing may be deleted) and one naming each (delete it or
                    nothing; the other never)
    LoCoMo          every turn a memory (bench/locomo.py's loader); each question with
                    evidence recalled in its own conversation (the evidence turns are
                    the relevant memories) and in the next conversation (about nothing
                    stored there)

    python bench/calibrate.py                  # all sets; report on stdout
    python bench/calibrate.py --out bench/RESULTS.md --dump bench/out/calibrate.json
    python bench/calibrate.py --from bench/out/calibrate.json   # re-judge a dump

Only scores are reported (no timings): they do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import corpus
import harness
import locomo
from memoryd_client import AsyncMemoryClient, pb

# memory, a question about it, a few of its words, a paraphrase, "forget that ..."
PREFERENCES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "The user prefers dark mode in every editor",
        "which theme does the user like?",
        "dark mode",
        "the user likes dark themes in editors",
        "forget that I like dark mode",
    ),
    (
        "The user drinks green tea without sugar.",
        "What does the user drink?",
        "green tea",
        "the user has unsweetened green tea",
        "forget that I drink green tea",
    ),
    (
        "The user is allergic to peanuts.",
        "Does the user have any food allergies?",
        "peanut allergy",
        "the user can't eat peanuts",
        "forget that I'm allergic to peanuts",
    ),
    (
        "The user's cat is called Miso.",
        "What is the name of the user's pet?",
        "cat Miso",
        "the user has a cat named Miso",
        "forget my cat's name",
    ),
    (
        "The user commutes to work by bicycle.",
        "How does the user get to work?",
        "bicycle commute",
        "the user cycles to the office",
        "forget that I bike to work",
    ),
    (
        "The user is learning to play the cello.",
        "Which instrument is the user learning?",
        "cello lessons",
        "the user is taking up the cello",
        "forget that I'm learning cello",
    ),
    (
        "The user keeps a vegetarian diet.",
        "Does the user eat meat?",
        "vegetarian",
        "the user doesn't eat meat",
        "forget that I'm vegetarian",
    ),
    (
        "The user speaks Portuguese and Japanese.",
        "Which languages does the user speak?",
        "Portuguese and Japanese",
        "the user is fluent in Portuguese and Japanese",
        "forget which languages I speak",
    ),
    (
        "The user's favourite film is Spirited Away.",
        "What is the user's favourite movie?",
        "Spirited Away",
        "the user loves the film Spirited Away most",
        "forget my favourite film",
    ),
    (
        "The user runs a half marathon every October.",
        "Does the user do any running races?",
        "half marathon",
        "each October the user runs a half marathon",
        "forget about my half marathon",
    ),
    (
        "The user dislikes phone calls and prefers chat.",
        "How should I contact the user?",
        "phone calls",
        "the user would rather chat than talk on the phone",
        "forget that I hate phone calls",
    ),
    (
        "The user wakes up at six every morning.",
        "When does the user get up?",
        "wakes up at six",
        "the user gets up at 6 am daily",
        "forget when I wake up",
    ),
    (
        "The user's laptop is a ThinkPad X1 Carbon.",
        "What computer does the user have?",
        "ThinkPad",
        "the user works on a ThinkPad X1 Carbon laptop",
        "forget what laptop I have",
    ),
    (
        "The user plans to visit Kyoto next April.",
        "Where is the user travelling next spring?",
        "Kyoto trip",
        "the user is going to Kyoto in April",
        "forget my Kyoto plans",
    ),
    (
        "The user collects vintage fountain pens.",
        "What does the user collect?",
        "fountain pens",
        "the user has a collection of old fountain pens",
        "forget that I collect pens",
    ),
    (
        "The user enjoys hiking in the Alps.",
        "What does the user do outdoors?",
        "hiking Alps",
        "the user likes mountain hikes in the Alps",
        "forget that I hike in the Alps",
    ),
    (
        "The user prefers tabs over spaces for indentation.",
        "Tabs or spaces?",
        "tabs over spaces",
        "the user indents code with tabs",
        "forget my indentation preference",
    ),
    (
        "The user's daughter starts school in autumn.",
        "When does the user's daughter start school?",
        "daughter school",
        "the user's kid begins school this fall",
        "forget about my daughter's school",
    ),
    (
        "The user likes to get answers as short bullet lists.",
        "How does the user want answers formatted?",
        "bullet lists",
        "the user wants brief bulleted replies",
        "forget that I want bullet points",
    ),
    (
        "The user lives in a flat near the river in Porto.",
        "Where does the user live?",
        "flat in Porto",
        "the user's apartment is by the river in Porto",
        "forget where I live",
    ),
    (
        "The user's favourite programming language is Rust.",
        "Which programming language does the user like best?",
        "Rust",
        "the user loves coding in Rust",
        "forget that Rust is my favourite language",
    ),
    (
        "The user takes their coffee black with no sugar.",
        "How does the user take coffee?",
        "black coffee",
        "the user drinks coffee without milk or sugar",
        "forget how I take my coffee",
    ),
    (
        "The user works remotely on Fridays.",
        "Which days does the user work from home?",
        "remote Fridays",
        "on Fridays the user works from home",
        "forget that I work from home on Fridays",
    ),
    (
        "The user's birthday is on the 3rd of July.",
        "When is the user's birthday?",
        "birthday July",
        "the user was born on July 3rd",
        "forget my birthday",
    ),
    (
        "The user is afraid of flying and prefers trains.",
        "How does the user like to travel?",
        "afraid of flying",
        "the user avoids planes and takes the train",
        "forget that I'm scared of flying",
    ),
    (
        "The user supports FC Porto.",
        "Which football team does the user support?",
        "FC Porto",
        "the user is an FC Porto fan",
        "forget which team I support",
    ),
    (
        "The user reads science fiction before bed.",
        "What does the user read?",
        "science fiction",
        "the user likes sci-fi novels at night",
        "forget my reading habits",
    ),
    (
        "The user wants meeting notes sent by email, not Slack.",
        "How should meeting notes be shared with the user?",
        "meeting notes email",
        "the user prefers getting meeting notes by e-mail",
        "forget how I want meeting notes",
    ),
    (
        "The user uses Neovim with a custom Lua config.",
        "Which editor does the user use?",
        "Neovim",
        "the user edits code in Neovim",
        "forget that I use Neovim",
    ),
    (
        "The user's partner is called Sam and works as a nurse.",
        "Who is the user's partner?",
        "partner Sam",
        "the user's significant other Sam is a nurse",
        "forget about Sam",
    ),
)
FORGET_KINDS = ("words", "paraphrase", "forget-that")

# Two memories differing in one value; a query naming neither; one naming each.
PAIRS: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "The user's favourite colour is green.",
        "The user's favourite colour is blue.",
        "the user's favourite colour",
        "favourite colour green",
        "favourite colour blue",
    ),
    (
        "The user drinks green tea in the morning.",
        "The user drinks black coffee in the afternoon.",
        "what the user drinks",
        "green tea in the morning",
        "black coffee in the afternoon",
    ),
    (
        "The user's sister lives in Berlin.",
        "The user's brother lives in Madrid.",
        "where the user's siblings live",
        "sister in Berlin",
        "brother in Madrid",
    ),
    (
        "The user prefers dark mode in the terminal.",
        "The user prefers light mode in the browser.",
        "the user's colour scheme preference",
        "dark mode in the terminal",
        "light mode in the browser",
    ),
    (
        "The user has a dog called Rex.",
        "The user has a cat called Luna.",
        "the user's pets",
        "dog Rex",
        "cat Luna",
    ),
    (
        "The user's standup is at 9am on Mondays.",
        "The user's retro is at 4pm on Fridays.",
        "the user's team meetings",
        "standup on Mondays",
        "retro on Fridays",
    ),
    (
        "The user is allergic to peanuts.",
        "The user is allergic to shellfish.",
        "the user's allergies",
        "peanut allergy",
        "shellfish allergy",
    ),
    (
        "The user's work laptop is a MacBook Pro.",
        "The user's home laptop is a ThinkPad.",
        "the user's laptops",
        "work MacBook",
        "home ThinkPad",
    ),
)

# About nothing in PREFERENCES or PAIRS.
OFF_TOPIC = (
    "What is the user's shoe size?",
    "Which car does the user drive?",
    "What is the capital of Australia?",
    "What is the user's blood type?",
    "Does the user play golf?",
    "What did the user eat for dinner yesterday?",
    "What's the weather tomorrow?",
    "Who won the football world cup in 2010?",
    "When is the user's next dentist appointment?",
    "What is the user's favourite board game?",
    "Which bank does the user use?",
    "How tall is the user?",
    "What is the user's mortgage rate?",
    "Does the user own a motorbike?",
    "Which podcast does the user listen to?",
    "What is the wifi password?",
    "How do I reset my router?",
    "what's the user's email address",
    "Does the user like jazz?",
    "How many hours does the user sleep?",
    "forget my shoe size",
    "forget that I play golf",
    "forget the wifi password",
    "forget my car's licence plate",
    "forget that I like jazz",
    "forget the rules of underwater hockey",
    "forget my mortgage details",
    "forget that I own a motorbike",
    "forget my gym schedule",
    "delete what I said about my boss",
    "forget my passport number",
    "forget that I hate olives",
    "forget my dentist appointment",
    "forget my favourite podcast",
    "forget the name of my landlord",
    "the user's shoe size",
    "golf handicap",
    "motorbike",
    "tax return deadline",
    "the user's salary",
)

BACKGROUND = 500  # corpus memories beside the preferences in the "together" store


@dataclass
class Query:
    """One Recall and what it was about: ``relevant`` are the ids it is about (empty: about
    nothing stored), ``kind`` says which set and phrasing it is."""

    set: str
    kind: str
    text: str
    relevant: list[str]
    ranked: list[tuple[str, float, float]] = field(default_factory=list)  # id, final, cosine


async def recall_all(
    client: AsyncMemoryClient,
    asks: Sequence[tuple[str, Query]],
    parallel: int,
    as_of: dict[str, Any] | None = None,
) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one(agent: str, q: Query) -> None:
        opts = pb.RecallOptions(**as_of[agent]) if as_of and agent in as_of else None
        async with gate:
            r = await client.recall(agent, q.text, limit=10, explain=True, options=opts)
        q.ranked = [(h.memory.id, h.score, h.explain.vector) for h in r.results]

    await asyncio.gather(*(one(a, q) for a, q in asks))


async def store(client: AsyncMemoryClient, agent: str, text: str) -> str:
    r = await client.store(agent, text, category=pb.CATEGORY_OTHER)
    if r.outcome != pb.STORE_OUTCOME_CREATED:
        raise SystemExit(f"{text!r} was not created: {pb.StoreOutcome.Name(r.outcome)}")
    return str(r.memory.id)


async def preference_queries(client: AsyncMemoryClient, args: argparse.Namespace) -> list[Query]:
    run = uuid.uuid4().hex[:8]
    asks: list[tuple[str, Query]] = []
    # Each memory alone in its own agent, as after the README's one store.
    alone = [f"cal-alone-{run}-{i}" for i in range(len(PREFERENCES))]
    ids = [await store(client, a, p[0]) for a, p in zip(alone, PREFERENCES, strict=True)]
    for i, (agent, mid, p) in enumerate(zip(alone, ids, PREFERENCES, strict=True)):
        asks.append((agent, Query("alone", "question", p[1], [mid])))
        for kind, text in zip(FORGET_KINDS, p[2:], strict=True):
            asks.append((agent, Query("alone", kind, text, [mid])))
        # Two queries about nothing stored per one-memory agent (each off-topic query
        # meets a few different memories).
        for j in (2 * i, 2 * i + 1):
            asks.append((agent, Query("alone", "off-topic", OFF_TOPIC[j % len(OFF_TOPIC)], [])))
    # All together, with corpus memories as background.
    together = f"cal-together-{run}"
    ids = [await store(client, together, p[0]) for p in PREFERENCES]
    background = corpus.take(corpus.memories(args.seed), BACKGROUND)
    gate = asyncio.Semaphore(args.parallel)

    async def one(text: str) -> None:
        async with gate:
            await client.store(together, text, category=pb.CATEGORY_OTHER)

    await asyncio.gather(*(one(t) for t in background))
    for mid, p in zip(ids, PREFERENCES, strict=True):
        asks.append((together, Query("together", "question", p[1], [mid])))
        for kind, text in zip(FORGET_KINDS, p[2:], strict=True):
            asks.append((together, Query("together", kind, text, [mid])))
    asks += [(together, Query("together", "off-topic", t, [])) for t in OFF_TOPIC]
    # Similar pairs, each pair in its own agent.
    for i, (a, b, neither, about_a, about_b) in enumerate(PAIRS):
        agent = f"cal-pair-{run}-{i}"
        ida, idb = await store(client, agent, a), await store(client, agent, b)
        asks.append((agent, Query("pairs", "neither", neither, [])))
        asks.append((agent, Query("pairs", "one", about_a, [ida])))
        asks.append((agent, Query("pairs", "one", about_b, [idb])))
    harness.log(f"preference sets: {len(asks)} queries")
    await recall_all(client, asks, args.parallel)
    return [q for _, q in asks]


async def locomo_queries(client: AsyncMemoryClient, args: argparse.Namespace) -> list[Query]:
    convs = locomo.load(args.data, args.conversations)
    for conv in convs:
        await locomo.ingest(client, conv)
        harness.log(f"LoCoMo {conv.sample_id}: {len(conv.turns)} turns stored")
    as_of = {c.agent: {"as_of": locomo.ts(c.last_date + timedelta(days=1))} for c in convs}
    asks: list[tuple[str, Query]] = []
    for i, conv in enumerate(convs):
        by_dia = {d: m for m, ds in conv.memory_to_dia.items() for d in ds}
        other = convs[(i + 1) % len(convs)]
        for question, _, evidence in conv.questions:
            relevant = sorted(by_dia[d] for d in evidence if d in by_dia)
            asks.append((conv.agent, Query("locomo", "question", question, relevant)))
            if other is not conv:
                asks.append((other.agent, Query("locomo", "off-topic", question, [])))
    harness.log(f"LoCoMo: {len(asks)} queries")
    await recall_all(client, asks, args.parallel, as_of)
    return [q for _, q in asks]


# -- judging ---------------------------------------------------------------------------


def pct(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def relevant_score(q: Query, col: int) -> float:
    """The best score of a memory the query is about (0 when none is in the top 10)."""
    return max((r[col] for r in q.ranked if r[0] in q.relevant), default=0.0)


def top(q: Query, col: int, k: int = 0) -> float:
    return q.ranked[k][col] if len(q.ranked) > k else 0.0


def distribution_rows(queries: Sequence[Query], col: int) -> list[list[object]]:
    groups: dict[tuple[str, str], list[Query]] = {}
    for q in queries:
        groups.setdefault((q.set, q.kind), []).append(q)
    rows: list[list[object]] = []
    for (set_, kind), qs in groups.items():
        if kind in ("off-topic", "neither"):
            what, vals = "best memory (about nothing stored)", [top(q, col) for q in qs]
        else:
            what, vals = "the memory it is about", [relevant_score(q, col) for q in qs]
        rows.append(
            [set_, kind, what, len(vals)]
            + [pct(vals, p) for p in (5, 10, 25, 50, 75, 90, 95)]
            + [max(vals)]
        )
    return rows


def forget_outcome(q: Query, col: int, strong: float, margin: float) -> str:
    """'right', 'wrong' (deleted a memory the query was not about) or 'none'."""
    s1, s2 = top(q, col), top(q, col, 1)
    if s1 < strong or s1 - s2 < margin:
        return "none"
    return "right" if q.ranked[0][0] in q.relevant else "wrong"


FORGET_GROUPS = {
    "README: 'dark mode' alone": lambda q: q.set == "alone" and q.text == "dark mode",
    "alone: words / paraphrase / forget-that": lambda q: (
        q.set == "alone" and q.kind in FORGET_KINDS
    ),
    "together: words / paraphrase / forget-that": (
        lambda q: q.set == "together" and q.kind in FORGET_KINDS
    ),
    "pairs: naming one": lambda q: q.set == "pairs" and q.kind == "one",
    "pairs: naming neither": lambda q: q.set == "pairs" and q.kind == "neither",
    "off-topic (alone + together)": (
        lambda q: q.set in ("alone", "together") and q.kind == "off-topic"
    ),
    "questions (alone + together)": (
        lambda q: q.set in ("alone", "together") and q.kind == "question"
    ),
    "LoCoMo questions, own conversation": lambda q: q.set == "locomo" and q.kind == "question",
    "LoCoMo questions, other conversation": lambda q: q.set == "locomo" and q.kind == "off-topic",
}


def forget_table(queries: Sequence[Query], rules: Sequence[tuple[str, int, float, float]]) -> str:
    rows = []
    for name, col, strong, margin in rules:
        for group, pick in FORGET_GROUPS.items():
            qs = [q for q in queries if pick(q)]
            if not qs:
                continue
            outcomes = [forget_outcome(q, col, strong, margin) for q in qs]
            kept = [q for q, o in zip(qs, outcomes, strict=True) if o == "none" and q.relevant]
            listed = [q for q in kept if relevant_score(q, FINAL) >= CANDIDATE_SCORE]
            rows.append(
                [
                    name,
                    group,
                    len(qs),
                    f"{outcomes.count('right') / len(qs):.0%}",
                    f"{outcomes.count('wrong') / len(qs):.1%} ({outcomes.count('wrong')})",
                    f"{len(listed)}/{len(kept)}" if kept else "-",
                ]
            )
    return harness.table(
        [
            "rule",
            "queries",
            "n",
            "deletes the intended",
            "deletes another",
            f"not deleted: intended listed (final >= {CANDIDATE_SCORE})",
        ],
        rows,
    )


def auto_recall_table(queries: Sequence[Query], floors: Sequence[float], k: int = 3) -> str:
    """Per floor: the share of queries whose block (top ``k`` over the floor) holds a
    memory they are about, against the same without a floor; and the share of queries
    about nothing stored that get an empty block."""
    rows = []
    sets = [
        ("alone", ("alone",)),
        ("together", ("together",)),
        ("LoCoMo", ("locomo",)),
    ]
    for floor in floors:
        row: list[object] = [f"{floor:.2f}"]
        for _, names in sets:
            rel = [q for q in queries if q.set in names and q.kind == "question"]
            off = [q for q in queries if q.set in names and q.kind == "off-topic"]
            base = [q for q in rel if any(r[0] in q.relevant for r in q.ranked[:k])]
            kept = [
                q for q in base if any(r[0] in q.relevant and r[1] >= floor for r in q.ranked[:k])
            ]
            empty = [q for q in off if top(q, 1) < floor]
            row += [
                f"{len(kept) / max(1, len(base)):.0%} ({len(kept)}/{len(base)})",
                f"{len(empty) / max(1, len(off)):.0%}",
            ]
        rows.append(row)
    return harness.table(
        ["hooks.min_score"]
        + [f"{name}: {what}" for name, _ in sets for what in ("relevant kept", "nothing -> empty")],
        rows,
    )


FINAL, COSINE = 1, 2
RULES = [
    ("before: cosine >= 0.9 among >= 0.7", COSINE, 0.9, 0.0),
    ("final >= 0.45, margin 0.15", FINAL, 0.45, 0.15),
    ("final >= 0.50, margin 0.10", FINAL, 0.50, 0.10),
    ("**final >= 0.50, margin 0.15 (shipped)**", FINAL, 0.50, 0.15),
    ("final >= 0.50, margin 0.20", FINAL, 0.50, 0.20),
    ("final >= 0.55, margin 0.15", FINAL, 0.55, 0.15),
]
CANDIDATE_SCORE = 0.3  # forget.candidate_score: what is listed when nothing is deleted
FLOORS = [0.2, 0.25, 0.28, 0.3, 0.35, 0.4]


def judge(args: argparse.Namespace, queries: Sequence[Query]) -> None:
    dist_headers = [
        "set",
        "queries",
        "score of",
        "n",
        "p5",
        "p10",
        "p25",
        "p50",
        "p75",
        "p90",
        "p95",
        "max",
    ]
    rules = list(RULES)
    for spec in args.rule:
        strong, margin = (float(x) for x in spec.split(","))
        rules.append((f"final >= {strong:.2f}, margin {margin:.2f}", FINAL, strong, margin))
    floors = sorted(set(FLOORS + args.floor))
    readme = {q.text: q for q in queries if q.set == "alone" and q.relevant}
    readme_line = ", ".join(
        f"{t!r}: final {relevant_score(readme[t], FINAL):.3f}, cosine "
        f"{relevant_score(readme[t], COSINE):.3f}"
        for t in ("dark mode", "which theme does the user like?")
        if t in readme
    )
    sections = [
        "README example (the memory alone in agent main-like store): " + readme_line,
        "Final pipeline score (what Recall returns):\n\n"
        + harness.table(dist_headers, distribution_rows(queries, FINAL)),
        "Cosine alone (what forget by query used before):\n\n"
        + harness.table(dist_headers, distribution_rows(queries, COSINE)),
        "Forget by query: delete the top match when its score >= strong and it leads the "
        "runner-up by >= margin (LoCoMo questions are not forget requests: they show how "
        "often a question-shaped query would delete a turn):\n\n" + forget_table(queries, rules),
        "Auto-recall (BuildContext: top 3 over hooks.min_score):\n\n"
        + auto_recall_table(queries, floors),
    ]
    harness.report(args, "Score calibration: forget and auto-recall floors", sections)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_common_args(p)
    p.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo JSON")
    p.add_argument("--conversations", type=int, help="only the first N LoCoMo conversations")
    p.add_argument("--no-locomo", action="store_true", help="the preference sets only")
    p.add_argument("--parallel", type=int, default=8, help="recalls in flight")
    p.add_argument("--dump", type=Path, help="write every query's ranked scores as JSON")
    p.add_argument("--from", dest="source", type=Path, help="judge a --dump instead")
    p.add_argument("--rule", action="append", default=[], help="STRONG,MARGIN to judge too")
    p.add_argument("--floor", action="append", type=float, default=[], help="min_score too")
    args = p.parse_args()
    if args.source:
        queries = [Query(**q) for q in json.loads(args.source.read_text())]
        judge(args, queries)
        return
    if not args.no_locomo and not args.data.is_file():
        raise SystemExit(f"LoCoMo not found at {args.data}; pass --data PATH or --no-locomo")

    async def collect(address: str) -> list[Query]:
        async with AsyncMemoryClient(address, timeout=120.0) as client:
            out = await preference_queries(client, args)
            if not args.no_locomo:
                out += await locomo_queries(client, args)
            return out

    with harness.target_from_args(args) as target:
        queries = asyncio.run(collect(target.address))
    if args.dump:
        args.dump.parent.mkdir(parents=True, exist_ok=True)
        args.dump.write_text(json.dumps([asdict(q) for q in queries]))
    judge(args, queries)
    print(f"{len(queries)} queries judged", file=sys.stderr)


if __name__ == "__main__":
    main()
