"""What the time-expression rules cost a query, and what they find in ordinary text.

Cost: times ``timewindow.matches`` without its cache (every rule the query's scripts call
for, on a query never seen before) on XQuAD's questions per language and LoCoMo's English
ones, in process, one at a time; prints the median and p90 in microseconds, beside the
same rules run without the pre-check by script (every rule on every query), and, with
``--baseline``, beside another checkout's ``matches`` (e.g. main before this work).

Scan: runs every rule over every XQuAD paragraph and question of each language and prints
how often each expression fired, with examples: Wikipedia prose holds few requests about
the reader's yesterday, so its hits are read to find the false ones.

    python bench/timeexpr.py                                # cost
    python bench/timeexpr.py --baseline /tmp/main-export    # also that tree's cost
    python bench/timeexpr.py --scan --langs ar,th,vi        # what fires in XQuAD
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from memoryd.core import timewindow
from memoryd.core.timewindow import resolve, zone

ROOT = Path(__file__).resolve().parent.parent
# the nearest shared/datasets/ beside the clone or above (a worktree sits one level deeper)
SHARED = next(
    (d / "shared" / "datasets" for d in ROOT.parents if (d / "shared" / "datasets").is_dir()),
    ROOT.parent / "shared" / "datasets",
)
LANGS = ("en", "es", "ru", "ar", "th", "vi")


def questions(data: Path, lang: str) -> list[str]:
    doc = json.loads((data / "xquad" / f"xquad.{lang}.json").read_text(encoding="utf-8"))
    return [qa["question"] for a in doc["data"] for para in a["paragraphs"] for qa in para["qas"]]


def every_rule(query: str) -> int:
    """The rules as ``matches`` runs them, without the pre-check by script."""
    text = query if query.isascii() else unicodedata.normalize("NFC", query)
    return sum(1 for _, pattern, _ in timewindow._RULES if pattern.search(text))


def timed(fn: Callable[[str], object], texts: list[str]) -> tuple[float, float]:
    for t in texts[:20]:
        fn(t)
    took = []
    for t in texts:
        start = time.perf_counter()
        fn(t)
        took.append((time.perf_counter() - start) * 1e6)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.9)]


def cost(args: argparse.Namespace) -> None:
    sets: dict[str, list[str]] = {}
    locomo = args.data / "locomo" / "locomo10.json"
    if locomo.is_file():
        doc = json.loads(locomo.read_text(encoding="utf-8"))
        sets["locomo-en"] = [q["question"] for s in doc for q in s["qa"]][:1000]
    for lang in args.langs:
        sets[f"xquad-{lang}"] = questions(args.data, lang)[:500]
    baseline = None
    if args.baseline:
        path = args.baseline / "memoryd" / "core" / "timewindow.py"
        spec = importlib.util.spec_from_file_location("baseline_timewindow", path)
        assert spec is not None and spec.loader is not None
        baseline = importlib.util.module_from_spec(spec)
        sys.modules["baseline_timewindow"] = baseline
        spec.loader.exec_module(baseline)
    uncached = timewindow.matches.__wrapped__
    print(f"{len(timewindow._RULES)} rules")
    head = "| questions | matches median us | p90 us | every rule median us |"
    print(head + (" baseline median us |" if baseline else ""))
    print("|---|---|---|---|" + ("---|" if baseline else ""))
    for name, texts in sets.items():
        med, p90 = timed(uncached, texts)
        row = f"| {name} | {med:.1f} | {p90:.1f} | {timed(every_rule, texts)[0]:.1f} |"
        if baseline is not None:
            row += f" {timed(baseline.matches.__wrapped__, texts)[0]:.1f} |"
        print(row)


def scan(args: argparse.Namespace) -> None:
    """Every place a rule fires in XQuAD's paragraphs and questions (whole paragraphs: Thai
    has no sentence ends, and a number before "ปีที่แล้ว" must stay in view)."""
    ref, utc = datetime(2026, 3, 18, 12, tzinfo=UTC), zone("UTC")
    for lang in args.langs:
        doc = json.loads((args.data / "xquad" / f"xquad.{lang}.json").read_text(encoding="utf-8"))
        texts = []
        for article in doc["data"]:
            for para in article["paragraphs"]:
                texts += [para["context"], *(qa["question"] for qa in para["qas"])]
        hits: Counter[str] = Counter()
        examples: dict[str, list[str]] = defaultdict(list)
        resolved = 0
        for text in texts:
            resolved += resolve(text, ref, utc) is not None
            norm = unicodedata.normalize("NFC", text)
            for _, pattern, _ in timewindow._RULES:
                for m in pattern.finditer(norm):
                    hits[m.group().strip()] += 1
                    if len(examples[m.group().strip()]) < args.examples:
                        a, b = max(m.start() - 50, 0), m.end() + 30
                        examples[m.group().strip()].append(norm[a:b].replace("\n", " "))
        print(
            f"## {lang}: {sum(hits.values())} expressions in {len(texts)} paragraphs and"
            f" questions; {resolved} of them resolve to a window"
        )
        for expression, n in hits.most_common():
            print(f"- {expression!r}: {n}")
            for text in examples[expression]:
                print(f"    ...{text}...")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=SHARED, help="the shared datasets' folder")
    p.add_argument("--langs", type=lambda s: s.split(","), default=list(LANGS))
    p.add_argument("--baseline", type=Path, help="a checkout whose timewindow.py to compare")
    p.add_argument("--scan", action="store_true", help="list what fires in XQuAD instead")
    p.add_argument("--examples", type=int, default=3, help="examples per expression (--scan)")
    args = p.parse_args()
    if args.scan:
        scan(args)
    else:
        cost(args)


if __name__ == "__main__":
    main()
