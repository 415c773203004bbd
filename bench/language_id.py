"""What language detection costs a text: py3langid's own ``classify`` beside memoryd's
(``language._classify``: the library's tables, its scores summed by the numba kernel
``nb_language_scores``), on LoCoMo's questions and XQuAD's per language, in process, one
text at a time: the median microseconds back to back, and with the caches cold (32 MiB
written between two calls, as a daemon's other work does between two Recalls); and the
texts on which the two pick different languages (there should be none).

    python bench/language_id.py
    python bench/language_id.py --langs en,es --limit 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memoryd.core import language

ROOT = Path(__file__).resolve().parent.parent
SHARED = next(
    (d / "shared" / "datasets" for d in ROOT.parents if (d / "shared" / "datasets").is_dir()),
    ROOT.parent / "shared" / "datasets",
)


def texts(data: Path, langs: list[str], limit: int) -> dict[str, list[str]]:
    sets: dict[str, list[str]] = {}
    locomo = data / "locomo" / "locomo10.json"
    if locomo.is_file():
        doc = json.loads(locomo.read_text(encoding="utf-8"))
        sets["locomo-en"] = [q["question"] for s in doc for q in s["qa"]][:limit]
    for lang in langs:
        path = data / "xquad" / f"xquad.{lang}.json"
        if path.is_file():
            doc = json.loads(path.read_text(encoding="utf-8"))
            qs = [qa["question"] for a in doc["data"] for p in a["paragraphs"] for qa in p["qas"]]
            sets[f"xquad-{lang}"] = qs[:limit]
    return sets


def timed(fn: Callable[[str], object], items: list[str], evict: np.ndarray | None) -> float:
    for t in items[:20]:
        fn(t)
    took = []
    for t in items:
        if evict is not None:
            evict += 1
        start = time.perf_counter()
        fn(t)
        took.append((time.perf_counter() - start) * 1e6)
    return statistics.median(took)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=SHARED, help="the shared datasets' folder")
    p.add_argument(
        "--langs", type=lambda s: s.split(","), default=["en", "es", "ru", "ar", "th", "vi"]
    )
    p.add_argument("--limit", type=int, default=1000, help="texts per set")
    args = p.parse_args()
    ident = language._model()
    assert language._tables is not None, "py3langid's tables were not taken: nothing to compare"
    library, kernel = ident.classify, language._classify
    evict = np.zeros(32 << 20, dtype=np.uint8)
    print(
        "| texts | n | py3langid us | kernel us | py3langid us, caches cold "
        "| kernel us, caches cold | languages differ |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, items in texts(args.data, args.langs, args.limit).items():
        differ = sum(library(t)[0] != kernel(t)[0] for t in items)
        print(
            f"| {name} | {len(items)} | {timed(library, items, None):.1f} | "
            f"{timed(kernel, items, None):.1f} | {timed(library, items, evict):.1f} | "
            f"{timed(kernel, items, evict):.1f} | {differ} |"
        )


if __name__ == "__main__":
    main()
