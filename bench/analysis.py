"""What the lexical analysis costs a query: language detection plus BM25 terms.

Times ``Analyzer.query_terms`` (detect the query's language, analyse it in that language
and in the scopes' main language) on real questions, in process, one at a time: LoCoMo's
English questions and XQuAD's questions per language. Prints the median and p90 in
microseconds.

    python bench/analysis.py
    python bench/analysis.py --baseline /tmp/old-checkout   # also time that tree's
                                                            # Analyzer.terms (English only)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from memoryd.storage.lexical import Analyzer

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "datasets"


def timed(fn: Callable[[str], object], texts: list[str]) -> tuple[float, float]:
    for t in texts[:20]:
        fn(t)  # warm caches, as a running daemon has them
    took = []
    for t in texts:
        start = time.perf_counter()
        fn(t)
        took.append((time.perf_counter() - start) * 1e6)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.9)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=Path, default=SHARED)
    p.add_argument("--baseline", type=Path, help="a checkout whose lexical.py to compare")
    args = p.parse_args()
    locomo = json.loads((args.datasets / "locomo" / "locomo10.json").read_text())
    sets = {"locomo-en": [q["question"] for s in locomo for q in s["qa"]][:1000]}
    for lang in ("en", "es", "ru", "ar", "th", "vi"):
        doc = json.loads((args.datasets / "xquad" / f"xquad.{lang}.json").read_text())
        sets[f"xquad-{lang}"] = [
            qa["question"] for a in doc["data"] for para in a["paragraphs"] for qa in para["qas"]
        ][:500]
    analyzer = Analyzer()
    print(
        "| questions | query_terms median us | p90 us |"
        + (" baseline terms median us |" if args.baseline else "")
    )
    print("|---|---|---|" + ("---|" if args.baseline else ""))
    old = None
    if args.baseline:
        spec = importlib.util.spec_from_file_location(
            "baseline_lexical", args.baseline / "memoryd" / "storage" / "lexical.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["baseline_lexical"] = module
        spec.loader.exec_module(module)
        old = module.Analyzer()
    for name, texts in sets.items():
        lang = name.split("-")[1]
        med, p90 = timed(lambda q, lang=lang: analyzer.query_terms(q, [lang]), texts)
        row = f"| {name} | {med:.0f} | {p90:.0f} |"
        if old is not None:
            row += f" {timed(old.terms, texts)[0]:.0f} |"
        print(row)


if __name__ == "__main__":
    main()
