"""Who may import whom (STYLE.md, "The shape of the house"), checked on the source.

- ``native`` (memoryd_native) imports numpy, numba and the standard library only, and
  imports without the daemon;
- ``api`` is the only daemon package that imports the generated stubs (one copy, in
  memoryd_client._gen) or grpc's generated modules;
- ``core`` imports neither grpc, the stubs, lancedb nor onnxruntime.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAEMON = ROOT / "memoryd"
NATIVE = ROOT / "native" / "memoryd_native"


def imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports in functions included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def offenders(files: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    out = {}
    for path in files:
        bad = sorted(
            n for n in imports(path) if any(n == f or n.startswith(f + ".") for f in forbidden)
        )
        if bad:
            out[str(path.relative_to(ROOT))] = bad
    return out


def test_native_imports_numpy_numba_and_the_standard_library_only() -> None:
    files = sorted(NATIVE.rglob("*.py"))
    assert files
    allowed = {"numpy", "numba", "memoryd_native", *sys.stdlib_module_names}
    foreign = {
        str(path.relative_to(ROOT)): sorted(
            n for n in imports(path) if n.partition(".")[0] not in allowed
        )
        for path in files
    }
    assert {k: v for k, v in foreign.items() if v} == {}


def test_native_imports_without_the_daemon() -> None:
    code = (
        "import sys, memoryd_native; "
        "print(sorted(m for m in ('memoryd', 'memoryd_client', 'grpc') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT / "native",
    )
    assert result.stdout.strip() == "[]"


def test_only_api_imports_the_generated_stubs() -> None:
    outside_api = [
        p for p in sorted(DAEMON.rglob("*.py")) if "api" not in p.relative_to(DAEMON).parts
    ]
    found = offenders(outside_api, ("memoryd_client._gen", "memoryd._gen"))
    assert found == {}
    assert not (DAEMON / "_gen").exists(), "the stubs have one copy: memoryd_client._gen"


def test_core_imports_no_transport_storage_engine_or_model_runtime() -> None:
    core = sorted((DAEMON / "core").rglob("*.py"))
    found = offenders(core, ("grpc", "memoryd_client._gen", "lancedb", "onnxruntime"))
    assert found == {}
