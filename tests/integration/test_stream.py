"""Stream: one bidirectional session; every op answered by request_id; bad ops answered
with an Error and never end the session."""

from __future__ import annotations

import asyncio
import random
import uuid

import grpc
import pytest
from memoryd_client import AsyncMemoryClient, pb
from memoryd_client.client import recall_request, store_request, update_request

pytestmark = pytest.mark.integration


def _error_name(code: grpc.StatusCode) -> tuple[int, str]:
    return code.value[0], code.name


async def test_one_hundred_interleaved_ops_with_bad_ones(
    client, new_agent, seed, facts, run_stream
):
    agent, other = new_agent(), new_agent()
    seeded = seed(agent, facts[:10])
    forgotten, updated = seeded[:5], seeded[5:]

    ops: list[tuple[pb.StreamRequest, str, object]] = []  # request, result kind, expectation

    def add(kind: str, expect: object, **op: object) -> None:
        rid = f"r{len(ops):03d}-{kind}"
        ops.append((pb.StreamRequest(request_id=rid, **op), kind, expect))

    new_texts = facts[20:60]
    for text in new_texts:
        add("store", text, store=store_request(agent, text))
    for i in range(20):
        target = updated[i % 5]
        add("recall", target.id, recall=recall_request(agent, target.text, limit=3))
    for k, m in enumerate(updated):
        importance = round(0.1 + 0.15 * k, 2)
        add("update", (m.id, importance), update=update_request(agent, m.id, importance=importance))
    for m in forgotten:
        add("forget", m.id, forget=pb.ForgetRequest(agent_id=agent, id=m.id))
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    for _ in range(5):
        add("error", (invalid, "text"), store=store_request(agent, "   "))
        add("error", (invalid, "recall.max_limit"), recall=recall_request(agent, "x", limit=101))
        add("error", (invalid, "UUID"), update=update_request(agent, "nope", importance=0.5))
        missing = str(uuid.uuid4())
        add(
            "error",
            (grpc.StatusCode.NOT_FOUND, missing),
            forget=pb.ForgetRequest(agent_id=agent, id=missing),
        )
        add(
            "error",
            (invalid, "importance"),
            update=update_request(agent, updated[0].id, importance=7.0),
        )
    for _ in range(3):
        add("error", (invalid, "no op"))
    for _ in range(2):
        add(
            "error",
            (grpc.StatusCode.PERMISSION_DENIED, f"agent:{agent}"),
            store=store_request(other, "Sneaky write.", scope=f"agent:{agent}"),
        )
    assert len(ops) == 100
    random.Random(100).shuffle(ops)

    answers = await run_stream([req for req, _, _ in ops])

    for req, kind, expect in ops:
        resp = answers[req.request_id]
        got = resp.WhichOneof("result")
        if kind == "error":
            code, fragment = expect  # type: ignore[misc]
            assert got == "error", resp
            assert (resp.error.code, resp.error.code_name) == _error_name(code), resp
            assert fragment in resp.error.message, resp
            continue
        assert got == kind, resp
        if kind == "store":
            assert resp.store.outcome == pb.STORE_OUTCOME_CREATED, resp
            assert resp.store.memory.text == expect
        elif kind == "recall":
            assert resp.recall.results[0].memory.id == expect, resp
        elif kind == "update":
            mid, importance = expect  # type: ignore[misc]
            assert resp.update.memory.id == mid
            assert resp.update.memory.importance == pytest.approx(importance)
        elif kind == "forget":
            assert list(resp.forget.deleted_ids) == [expect]

    # The session's writes are all there, and nothing else.
    assert client.stats(agent).total == 10 - 5 + 40
    assert client.stats(other).total == 0
    listed = {m.text for m in client.list_all(agent)}
    assert listed == set(new_texts) | {m.text for m in updated}
    for m in forgotten:
        with pytest.raises(Exception, match="NOT_FOUND"):
            client.get(agent, m.id)
    for k, m in enumerate(updated):
        assert client.get(agent, m.id).importance == pytest.approx(round(0.1 + 0.15 * k, 2))


async def test_stream_is_a_session_answering_each_op_as_it_comes(address, new_agent):
    """The client sends the next op only after the previous one was answered: a server
    that waited for the end of the request stream would never answer (deadline)."""
    agent = new_agent()
    answered: asyncio.Queue[pb.StreamResponse] = asyncio.Queue()
    script = [
        pb.StreamRequest(request_id="bad-first", store=store_request(agent, "")),
        pb.StreamRequest(
            request_id="store", store=store_request(agent, "The user enjoys hiking in the Alps.")
        ),
        pb.StreamRequest(request_id="empty"),
        pb.StreamRequest(
            request_id="recall", recall=recall_request(agent, "Where does the user hike?")
        ),
    ]
    seen: list[pb.StreamResponse] = []

    async def requests():
        for req in script:
            yield req
            seen.append(await answered.get())

    async with AsyncMemoryClient(address, timeout=60.0) as c:

        async def converse() -> None:
            async for resp in c.stream(requests()):
                answered.put_nowait(resp)

        await asyncio.wait_for(converse(), timeout=60.0)

    assert [r.request_id for r in seen] == [r.request_id for r in script]
    assert seen[0].error.code_name == "INVALID_ARGUMENT"
    assert seen[1].store.outcome == pb.STORE_OUTCOME_CREATED
    assert seen[2].error.code_name == "INVALID_ARGUMENT"
    assert "store, recall, forget or update" in seen[2].error.message
    assert seen[3].recall.results[0].memory.id == seen[1].store.memory.id


async def test_stream_with_no_requests_ends_cleanly(run_stream):
    assert await run_stream([]) == {}
