"""Dynamic int8 quantisation of an embedding model, done once and cached on disk.

The built-in all-MiniLM-L6-v2 file stores its weights as int8 but dequantises them back to
float32 inside the graph (``Cast`` + ``Mul`` in front of every ``MatMul``), so at run time
it is an fp32 model: on this class of CPU (AVX2, no VNNI) a short query costs ~7-9 ms with
one thread (bench/embedder.py). Folding those casts into float
initialisers and re-quantising the ``MatMul`` weights per output channel
(``onnxruntime.quantization.quantize_dynamic``, integer matrix products with activations
quantised on the fly) halves a query's latency and raises batch throughput ~1.3-1.5x; the
vectors stay within cosine 0.97-1.0 of the fp32 model's (0.99 on average). Retrieval
quality is measured in ``bench/locomo.py`` (bench/RESULTS.md).

The result is keyed by the source file's SHA-256 and written atomically under the cache
directory, so only the first start on a machine pays the ~2-5 s this takes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

QUANTIZED_SUFFIX = "-dynq8"  # appended to the model identity recorded in the store
RECIPE = "dynq8pc-v1"  # bump when the transformation changes: old cache files are ignored


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoryd" / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def quantized_model(source: Path, cache_dir: Path) -> Path:
    """The path of ``source`` dynamically quantised to int8, building it if needed."""
    target = cache_dir / f"{_sha256(source)[:24]}-{RECIPE}.onnx"
    if target.is_file():
        return target
    started = time.perf_counter()
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        folded = Path(tmp) / "folded.onnx"
        out = Path(tmp) / "quantized.onnx"
        _fold_weight_dequantisation(source, folded)
        _quantize(folded, out)
        with contextlib.suppress(FileExistsError):
            os.replace(out, target)  # atomic: a concurrent start sees all or nothing
    log.info("quantised %s to int8 in %.1fs: %s", source, time.perf_counter() - started, target)
    return target


def _fold_weight_dequantisation(source: Path, dest: Path) -> None:
    """Replace ``Mul(Cast(int8 initialiser), scale initialiser)`` with its float value."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    drop: set[int] = set()
    folded: list[onnx.TensorProto] = []
    for node in graph.node:
        if node.op_type != "Mul" or len(node.input) != 2:
            continue
        cast = producer.get(node.input[0])
        scale = inits.get(node.input[1])
        if cast is None or cast.op_type != "Cast" or scale is None:
            continue
        quantized = inits.get(cast.input[0])
        if quantized is None:
            continue
        value = numpy_helper.to_array(quantized).astype(np.float32) * numpy_helper.to_array(
            scale
        ).astype(np.float32)
        folded.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        drop.update((id(node), id(cast)))
    nodes = [n for n in graph.node if id(n) not in drop]
    used = {name for n in nodes for name in n.input} | {o.name for o in graph.output}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + folded)
    onnx.save(model, str(dest))


def _quantize(source: Path, dest: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # It logs a line per tensor (INFO) and advice to "pre-process" (WARNING) through the
    # root logger. A filter on the root logger sees only records logged to it directly, and
    # the daemon logs through named loggers, so this quiets the quantiser alone (lowering
    # the root logger's level instead would silence every logger of every thread).
    root = logging.getLogger()
    root.addFilter(_quantiser_chatter)
    try:
        quantize_dynamic(
            str(source),
            str(dest),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
    finally:
        root.removeFilter(_quantiser_chatter)


def _quantiser_chatter(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR
