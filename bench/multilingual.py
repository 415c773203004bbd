"""Multilingual sentence recall on XQuAD through memoryd's gRPC API.

XQuAD is the same 240 Wikipedia paragraphs and 1,190 questions translated into each of
its languages (en, es, ru, ar, th, vi). Each paragraph is split into sentences; every
sentence is stored as a memory of one agent per language (``xquad-<lang>``); every
question is recalled (top 10) and the sentence holding the answer (the one containing
``answer_start``) is the relevant memory:

    MRR@10    1 / rank of the answer's sentence in the top 10 (0 if absent), averaged
    recall@5  share of questions whose answer's sentence is in the top 5

Rows per language, run the same way on the same sentences and questions:

    default   what the daemon ships (RecallOptions left unset)
    bm25      memoryd's lexical leg alone
    vector    memoryd's vector leg alone
    ref-bm25  a plain Okapi BM25 (k1 1.2, b 0.75) in this process with the language's own
              analysis: lower-case words, that language's stop words (the ``stop-words``
              package) and Snowball stemmer (PyStemmer; Vietnamese has none), Thai
              segmented into words by PyThaiNLP's dictionary segmenter (newmm)

    python bench/multilingual.py                      # all languages, all rows
    python bench/multilingual.py --langs en,es --configs default,bm25

The reference needs ``pip install stop-words pythainlp`` (``.[bench]``). The dataset
(XQuAD, Artetxe et al. 2020, CC BY-SA 4.0) is read from ../shared/datasets/xquad or
--data; it is never copied into this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import harness
from memoryd_client import AsyncMemoryClient, pb

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "xquad"
LANGS = ("en", "es", "ru", "ar", "th", "vi")
F = pb.FusionMode
R = pb.RerankMode
CONFIGS: dict[str, dict[str, object]] = {
    "default": {},
    "bm25": {
        "fusion": F.FUSION_MODE_BM25_ONLY,
        "importance_weight": 0.0,
        "rerank": R.RERANK_MODE_NONE,
    },
    "vector": {
        "fusion": F.FUSION_MODE_VECTOR_ONLY,
        "importance_weight": 0.0,
        "rerank": R.RERANK_MODE_NONE,
    },
}
REFERENCE = "ref-bm25"
DEFAULT_CONFIGS = ",".join([*CONFIGS, REFERENCE])

_SENTENCE_END = re.compile(r"(?<=[.!?。؟])\s+")
_SPACES = re.compile(r"\s+")


def split_sentences(text: str, lang: str) -> list[tuple[int, str]]:
    """(start offset, sentence) pairs. Thai marks sentence ends with a space alone (and
    also puts spaces between phrases), so Thai is split at spaces and pieces shorter than
    120 characters are joined to the next (so sentences come out about as long as the
    other languages' ones)."""
    pieces: list[tuple[int, str]] = []
    splitter = _SPACES if lang == "th" else _SENTENCE_END
    pos = 0
    for m in splitter.finditer(text):
        pieces.append((pos, text[pos : m.start()]))
        pos = m.end()
    pieces.append((pos, text[pos:]))
    out: list[tuple[int, str]] = []
    start, buf = -1, ""
    for at, piece in pieces:
        if start < 0:
            start = at
        buf = f"{buf} {piece}" if buf else piece
        if lang != "th" or len(buf) >= 120:
            out.append((start, buf.strip()))
            start, buf = -1, ""
    if buf:
        out.append((start, buf.strip()))
    return [(s, t) for s, t in out if t]


@dataclass
class Language:
    code: str
    sentences: list[str]  # sentence number -> text
    questions: list[tuple[str, int]]  # question, number of the answer's sentence
    memory_to_sentences: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))

    @property
    def agent(self) -> str:
        return f"xquad-{self.code}"


def _spaced_pieces(text: str) -> list[tuple[int, str]]:
    pieces: list[tuple[int, str]] = []
    pos = 0
    for m in _SPACES.finditer(text):
        pieces.append((pos, text[pos : m.start()]))
        pos = m.end()
    pieces.append((pos, text[pos:]))
    return [(s, t) for s, t in pieces if t]


def split_into(text: str, k: int) -> list[tuple[int, str]]:
    """Thai ``text`` cut at spaces into ``k`` consecutive pieces of about equal length (or
    fewer when it has fewer spaces)."""
    pieces = _spaced_pieces(text)
    total = sum(len(t) for _, t in pieces)
    out: list[tuple[int, str]] = []
    start, buf, done = -1, "", 0
    for i, (at, piece) in enumerate(pieces):
        if start < 0:
            start = at
        buf = f"{buf} {piece}" if buf else piece
        done += len(piece)
        need = k - len(out) - 1
        if need > 0 and (done >= total * (len(out) + 1) / k or len(pieces) - i - 1 == need):
            out.append((start, buf))
            start, buf = -1, ""
    if buf:
        out.append((start, buf))
    return out


def load(data: Path, lang: str, thai_pieces: str = "120") -> Language:
    """``thai_pieces``: "120" joins Thai's space-separated phrases to at least 120
    characters (``split_sentences``); "english" cuts each Thai paragraph into as many
    pieces as its English version has sentences (same number of memories as English)."""
    doc = json.loads((data / f"xquad.{lang}.json").read_text(encoding="utf-8"))
    english = None
    if lang == "th" and thai_pieces == "english":
        english = json.loads((data / "xquad.en.json").read_text(encoding="utf-8"))
    sentences: list[str] = []
    questions: list[tuple[str, int]] = []
    for a, article in enumerate(doc["data"]):
        for p, para in enumerate(article["paragraphs"]):
            context = para["context"].lstrip("\ufeff")
            shift = len(para["context"]) - len(context)
            if english is not None:
                en_context = english["data"][a]["paragraphs"][p]["context"].lstrip("\ufeff")
                spans = split_into(context, len(split_sentences(en_context, "en")))
            else:
                spans = split_sentences(context, lang)
            base = len(sentences)
            sentences.extend(t for _, t in spans)
            for qa in para["qas"]:
                at = qa["answers"][0]["answer_start"] - shift
                idx = max(i for i, (s, _) in enumerate(spans) if s <= max(at, 0))
                questions.append((qa["question"], base + idx))
    return Language(lang, sentences, questions)


@dataclass
class Scores:
    rr: list[float] = field(default_factory=list)
    hit5: list[float] = field(default_factory=list)

    def add(self, ranked: list[set[int]], relevant: int) -> None:
        rank = next((i + 1 for i, s in enumerate(ranked[:10]) if relevant in s), None)
        self.rr.append(1.0 / rank if rank else 0.0)
        self.hit5.append(1.0 if rank and rank <= 5 else 0.0)

    def row(self) -> tuple[float, float]:
        return statistics.fmean(self.rr), statistics.fmean(self.hit5)


# -- the reference: plain Okapi BM25 with the language's own analysis --------------------

STEMMERS = {"en": "english", "es": "spanish", "ru": "russian", "ar": "arabic"}
STOP_NAMES = {
    "en": "english",
    "es": "spanish",
    "ru": "russian",
    "ar": "arabic",
    "vi": "vietnamese",
}
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def reference_analyzer(lang: str) -> Callable[[str], list[str]]:
    import Stemmer
    from stop_words import get_stop_words

    stops = set(get_stop_words(STOP_NAMES[lang])) if lang in STOP_NAMES else set()
    if lang == "th":
        from pythainlp.corpus import thai_stopwords
        from pythainlp.tokenize import word_tokenize

        thai_stops = set(thai_stopwords())

        def thai(text: str) -> list[str]:
            words = word_tokenize(text.lower(), engine="newmm", keep_whitespace=False)
            return [w for w in words if _WORD.search(w) and w not in thai_stops]

        return thai
    stem = Stemmer.Stemmer(STEMMERS[lang]).stemWord if lang in STEMMERS else (lambda w: w)
    if lang == "vi":  # Vietnamese writes syllables apart: words are syllable bigrams too
        return lambda text: [w for w in _WORD.findall(text.lower()) if w not in stops]
    return lambda text: [stem(w) for w in _WORD.findall(text.lower()) if w not in stops]


class OkapiBM25:
    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.tf = [Counter(d) for d in docs]
        self.len = [len(d) for d in docs]
        self.avgdl = sum(self.len) / max(1, len(docs))
        df: Counter[str] = Counter()
        for c in self.tf:
            df.update(c.keys())
        n = len(docs)
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.postings: dict[str, list[int]] = defaultdict(list)
        for i, c in enumerate(self.tf):
            for t in c:
                self.postings[t].append(i)

    def top(self, query: list[str], k: int) -> list[int]:
        scores: dict[int, float] = defaultdict(float)
        for t, qtf in Counter(query).items():
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i in self.postings[t]:
                tf = self.tf[i][t]
                norm = self.k1 * (1 - self.b + self.b * self.len[i] / self.avgdl)
                scores[i] += qtf * idf * tf * (self.k1 + 1) / (tf + norm)
        return [i for i, _ in sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]]


def reference(lang: Language) -> Scores:
    analyse = reference_analyzer(lang.code)
    bm25 = OkapiBM25([analyse(s) for s in lang.sentences])
    scores = Scores()
    for question, relevant in lang.questions:
        scores.add([{i} for i in bm25.top(analyse(question), 10)], relevant)
    return scores


# -- memoryd -----------------------------------------------------------------------------


async def ingest(client: AsyncMemoryClient, lang: Language) -> None:
    async def requests() -> AsyncIterator[pb.StreamRequest]:
        for i, text in enumerate(lang.sentences):
            yield pb.StreamRequest(
                request_id=str(i),
                store=pb.StoreRequest(agent_id=lang.agent, text=text, category=pb.CATEGORY_FACT),
            )

    outcomes: Counter[str] = Counter()
    async for resp in client.stream(requests()):
        if resp.WhichOneof("result") != "store":
            raise SystemExit(f"store failed: {resp.error.code_name} {resp.error.message}")
        lang.memory_to_sentences[resp.store.memory.id].add(int(resp.request_id))
        outcomes[pb.StoreOutcome.Name(resp.store.outcome)] += 1
    # A sentence answered DUPLICATE is not stored: it counts as found when the memory it
    # was folded into is (memory_to_sentences), but its words are not in the index.
    print(f"{lang.code}: stored {dict(outcomes)}", file=sys.stderr)


async def evaluate(
    client: AsyncMemoryClient, lang: Language, options: dict[str, object], parallel: int
) -> Scores:
    scores = Scores()
    gate = asyncio.Semaphore(parallel)
    results: dict[int, list[set[int]]] = {}

    async def one(n: int, question: str) -> None:
        opts = pb.RecallOptions(**options)  # type: ignore[arg-type]
        async with gate:
            resp = await client.recall(lang.agent, question, limit=10, options=opts)
        results[n] = [lang.memory_to_sentences.get(h.memory.id, set()) for h in resp.results]

    await asyncio.gather(*(one(n, q) for n, (q, _) in enumerate(lang.questions)))
    for n, (_, relevant) in enumerate(lang.questions):
        scores.add(results[n], relevant)
    return scores


async def run(args: argparse.Namespace) -> None:
    codes = [c.strip() for c in args.langs.split(",") if c.strip()]
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    langs = [load(args.data, c, args.thai_pieces) for c in codes]
    for lang in langs:
        print(
            f"{lang.code}: {len(lang.sentences)} sentences, {len(lang.questions)} questions",
            file=sys.stderr,
        )
    table: dict[tuple[str, str], tuple[float, float]] = {}
    daemon_configs = [n for n in names if n in CONFIGS]
    if daemon_configs:
        async with AsyncMemoryClient(args.address, timeout=120.0) as client:
            for lang in langs:
                await ingest(client, lang)
                for name in daemon_configs:
                    scores = await evaluate(client, lang, CONFIGS[name], args.parallel)
                    table[(name, lang.code)] = scores.row()
                    print(name, lang.code, "{:.3f} {:.3f}".format(*scores.row()), file=sys.stderr)
    if REFERENCE in names:
        for lang in langs:
            table[(REFERENCE, lang.code)] = reference(lang).row()
            print(
                REFERENCE,
                lang.code,
                "{:.3f} {:.3f}".format(*table[(REFERENCE, lang.code)]),
                file=sys.stderr,
            )
    lines = [
        "| config | " + " | ".join(f"{c} MRR@10 / R@5" for c in codes) + " |",
        "|---" * (len(codes) + 1) + "|",
    ]
    for name in names:
        cells = " | ".join(
            "{:.3f} / {:.3f}".format(*table[(name, c)]) if (name, c) in table else "-"
            for c in codes
        )
        lines.append(f"| {name} | {cells} |")
    harness.write_table("\n".join(lines), args.out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    harness.add_quality_args(p)
    p.add_argument("--langs", default=",".join(LANGS))
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"comma list of {DEFAULT_CONFIGS}")
    p.add_argument("--parallel", type=int, default=8, help="recalls in flight")
    p.add_argument(
        "--thai-pieces",
        choices=("120", "english"),
        default="120",
        help="Thai memories: phrases joined to >= 120 characters (default), or each paragraph"
        " cut into as many pieces as its English version has sentences",
    )
    args = p.parse_args()
    if not (args.data / "xquad.en.json").is_file():
        raise SystemExit(f"XQuAD not found at {args.data}; pass --data DIR")
    needed = any(n in CONFIGS for n in args.configs.split(","))
    with harness.daemon_unless(args.address, args.env, needed=needed) as args.address:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
