"""The scenario language of tests/conformance/scenarios.json, for the Python runner.

Every client's runner implements the same few rules (see README.md beside this file):
``${name}`` substitution, paths (``a.b[0].c``, ``a[*].b``), the check operators, and the
result shape of each RPC kind. This module is the Python copy of those rules.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

SCENARIOS = Path(__file__).resolve().parent / "scenarios.json"
VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
SEGMENT = re.compile(r"^([^\[\]]*)((?:\[(?:\d+|\*)\])*)$")


def load() -> dict[str, Any]:
    return json.loads(SCENARIOS.read_text(encoding="utf-8"))


def covered_rpcs(doc: dict[str, Any]) -> set[str]:
    return {step["rpc"] for s in doc["scenarios"] for step in s["steps"]}


def substitute(value: Any, env: dict[str, Any]) -> Any:
    if isinstance(value, str):

        def repl(m: re.Match[str]) -> str:
            if m.group(1) not in env:
                raise AssertionError(f"${{{m.group(1)}}} was never saved")
            return str(env[m.group(1)])

        return VAR.sub(repl, value)
    if isinstance(value, list):
        return [substitute(v, env) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, env) for k, v in value.items()}
    return value


def resolve(doc: Any, path: str) -> Any:
    """The value at ``path``; None when absent; a list when the path has ``[*]``."""
    values = [doc]
    wild = False
    for part in path.split("."):
        m = SEGMENT.match(part)
        if m is None:
            raise AssertionError(f"bad path {path!r}")
        name, indexes = m.group(1), re.findall(r"\[(\d+|\*)\]", m.group(2))
        nxt = []
        for v in values:
            if name:
                v = v.get(name) if isinstance(v, dict) else None
            nxt.append(v)
        for idx in indexes:
            expanded = []
            for v in nxt:
                if not isinstance(v, list):
                    expanded.append(None)
                elif idx == "*":
                    wild = True
                    expanded.extend(v)
                else:
                    i = int(idx)
                    expanded.append(v[i] if i < len(v) else None)
            nxt = expanded
        values = nxt
    if wild:
        return [v for v in values if v is not None]
    return values[0]


def same(actual: Any, expected: Any) -> bool:
    if expected is None:
        return actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual is expected or (actual is None and expected is False)
    if isinstance(expected, (int, float)):
        try:
            a = 0.0 if actual is None else float(actual)
        except (TypeError, ValueError):
            return False
        return math.isclose(a, float(expected), rel_tol=1e-5, abs_tol=1e-6)
    if isinstance(expected, str):
        return (actual if actual is not None else "") == expected
    if isinstance(expected, list):
        actual = actual if actual is not None else []
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, dict):
        actual = actual if actual is not None else {}
        return (
            isinstance(actual, dict)
            and set(actual) == set(expected)
            and all(same(actual[k], v) for k, v in expected.items())
        )
    return False


def _contains(actual: Any, expected: Any) -> bool:
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    if isinstance(actual, list):
        return any(same(a, expected) for a in actual)
    return False


def check(result: Any, spec: dict[str, Any]) -> str | None:
    """None when ``spec`` holds on ``result``, else what is wrong."""
    path = spec["path"]
    actual = resolve(result, path)
    for op, want in spec.items():
        if op == "path":
            continue
        if op == "eq":
            ok = same(actual, want)
        elif op == "ne":
            ok = not same(actual, want)
        elif op == "len":
            ok = len(actual if actual is not None else []) == want
        elif op == "contains":
            ok = _contains(actual if actual is not None else [], want)
        elif op == "excludes":
            ok = not _contains(actual if actual is not None else [], want)
        elif op in ("gte", "lte"):
            a = float(actual) if actual is not None else 0.0
            ok = a >= want if op == "gte" else a <= want
        else:
            return f"unknown check operator {op!r}"
        if not ok:
            return f"{path} {op} {json.dumps(want)} failed: got {json.dumps(actual)}"
    return None
