"""The conformance scenarios (scenarios.json) through the Python client, against a real
daemon with auth on. Every other client runs the same file (see README.md here)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from memoryd_client import MemoryClient, MemorydError, hooks_pb, pb, review_pb
from memoryd_testing.launcher import Daemon

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine

DOC = engine.load()
pytestmark = pytest.mark.integration


def test_every_rpc_of_the_proto_has_a_scenario() -> None:
    rpcs = {
        f"{svc.name}.{m.name}"
        for module in (pb, hooks_pb, review_pb)
        for svc in module.DESCRIPTOR.services_by_name.values()
        for m in svc.methods
    }
    missing = rpcs - engine.covered_rpcs(DOC)
    assert not missing, f"RPCs without a conformance scenario: {sorted(missing)}"
    unknown = engine.covered_rpcs(DOC) - rpcs
    assert not unknown, f"scenarios name RPCs the proto lacks: {sorted(unknown)}"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("conformance")
    daemon = Daemon(
        base / "data", base / "stderr.log", {"MEMORYD_AUTH_TOKEN": DOC["auth_token"]}
    ).start()
    try:
        yield daemon.address
    finally:
        assert daemon.stop() == 0, daemon.log_tail()


def _parse(cls: type[Message], value: dict[str, Any]) -> Any:
    return json_format.ParseDict(value, cls())


def _json(message: Message) -> Any:
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


def _opt(msg: Message, field: str) -> Any:
    return getattr(msg, field) if msg.HasField(field) else None


def _unary(c: MemoryClient, rpc: str, req: dict[str, Any]) -> Any:
    """Calls the client's method for ``rpc`` with the request's fields; returns its JSON."""
    if rpc == "MemoryService.Store":
        r = _parse(pb.StoreRequest, req)
        return _json(
            c.store(
                r.agent_id,
                r.text,
                category=r.category,
                importance=_opt(r, "importance"),
                scope=r.scope,
                metadata=dict(r.metadata),
                idempotency_key=r.idempotency_key,
                created_at=r.created_at.ToDatetime() if r.HasField("created_at") else None,
                expires_at=r.expires_at.ToDatetime() if r.HasField("expires_at") else None,
                ttl=r.ttl,
            )
        )
    if rpc == "MemoryService.Recall":
        r = _parse(pb.RecallRequest, req)
        return _json(
            c.recall(
                r.agent_id,
                r.query,
                limit=r.limit,
                min_score=r.min_score,
                categories=list(r.categories),
                scopes=list(r.scopes),
                options=r.options if r.HasField("options") else None,
                explain=r.explain,
                full_text=r.full_text,
            )
        )
    if rpc == "MemoryService.Forget":
        r = _parse(pb.ForgetRequest, req)
        return _json(c.forget(r.agent_id, id=r.id, query=r.query))
    if rpc == "MemoryService.Update":
        r = _parse(pb.UpdateRequest, req)
        return _json(
            c.update(
                r.agent_id,
                r.id,
                text=_opt(r, "text"),
                importance=_opt(r, "importance"),
                category=r.category,
                metadata=dict(r.metadata),
                replace_metadata=r.replace_metadata,
                remove_metadata_keys=list(r.remove_metadata_keys),
                clear_expires_at=r.clear_expires_at,
            )
        )
    if rpc == "MemoryService.Get":
        r = _parse(pb.GetRequest, req)
        return {"memory": _json(c.get(r.agent_id, r.id))}
    if rpc == "MemoryService.List":
        r = _parse(pb.ListRequest, req)
        return _json(
            c.list(
                r.agent_id,
                page_size=r.page_size,
                page_token=r.page_token,
                scopes=list(r.scopes),
                categories=list(r.categories),
                oldest_first=r.oldest_first,
            )
        )
    if rpc == "MemoryService.Stats":
        return _json(c.stats(_parse(pb.StatsRequest, req).agent_id))
    if rpc == "MemoryService.ListConflicts":
        r = _parse(pb.ListConflictsRequest, req)
        return _json(c.conflicts(r.agent_id, limit=r.limit))
    if rpc == "MemoryService.Export":
        r = _parse(pb.ExportRequest, req)
        return {"memories": [_json(m) for m in c.export(r.agent_id, scopes=list(r.scopes))]}
    if rpc == "HookService.BuildContext":
        r = _parse(hooks_pb.BuildContextRequest, req)
        return _json(
            c.build_context(
                r.agent_id,
                r.prompt,
                session_id=r.session_id,
                max_results=r.max_results,
                min_score=r.min_score,
                time_budget_ms=r.time_budget_ms,
                scopes=list(r.scopes),
            )
        )
    if rpc == "HookService.Capture":
        r = _parse(hooks_pb.CaptureRequest, req)
        return _json(c.capture(r.agent_id, r.messages, session_id=r.session_id, scope=r.scope))
    if rpc == "ReviewService.Prepare":
        return _json(c.review_prepare(_parse(review_pb.PrepareReviewRequest, req)))
    if rpc == "ReviewService.Apply":
        return _json(c.review_apply(_parse(review_pb.ApplyReviewRequest, req)))
    raise AssertionError(f"the Python runner does not know {rpc}")


def _streaming(c: MemoryClient, rpc: str, reqs: list[Any]) -> Any:
    if rpc == "MemoryService.Import":
        parsed = [_parse(pb.ImportRequest, r) for r in reqs]
        agents = {r.agent_id for r in parsed}
        assert len(agents) == 1, "one Import call imports for one agent"
        return _json(c.import_memories(agents.pop(), [r.memory for r in parsed]))
    if rpc == "MemoryService.Stream":
        ops = [_parse(pb.StreamRequest, r) for r in reqs]
        return {"responses": {r.request_id: _json(r) for r in c.stream(ops, timeout=30)}}
    raise AssertionError(f"the Python runner does not know {rpc}")


@pytest.mark.parametrize("scenario", DOC["scenarios"], ids=lambda s: s["name"])
def test_scenario(daemon: str, scenario: dict[str, Any]) -> None:
    tokens = {"default": DOC["auth_token"], "no_token": None, "wrong_token": "wrong-token"}
    clients = {k: MemoryClient(daemon, token=t, timeout=30) for k, t in tokens.items()}
    env: dict[str, Any] = {}
    try:
        for n, step in enumerate(scenario["steps"]):
            where = f"{scenario['name']} step {n} ({step['rpc']})"
            who = step.get("client", "default")
            c = clients[who]
            try:
                if "requests" in step:
                    reqs = engine.substitute(step["requests"], env)
                    result = _streaming(c, step["rpc"], reqs)
                else:
                    result = _unary(c, step["rpc"], engine.substitute(step["request"], env))
                code, message = "OK", ""
            except MemorydError as e:
                code, message, result = e.code.name, e.message, None
            want = step.get("code", "OK")
            assert code == want, f"{where}: expected {want}, got {code}: {message}"
            if "message_contains" in step:
                assert step["message_contains"].lower() in message.lower(), (
                    f"{where}: message {message!r} lacks {step['message_contains']!r}"
                )
            for spec in engine.substitute(step.get("checks", []), env):
                problem = engine.check(result, spec)
                assert problem is None, f"{where}: {problem}\n{result}"
            for name, path in step.get("save", {}).items():
                env[name] = engine.resolve(result, path)
                assert env[name], f"{where}: nothing at {path} to save as {name}"
    finally:
        for c in clients.values():
            c.close()


def test_a_status_code_name_is_the_grpc_name() -> None:
    # The scenario file names codes as grpc.StatusCode names do; spot-check the mapping.
    assert grpc.StatusCode.INVALID_ARGUMENT.name == "INVALID_ARGUMENT"
