"""The isolation matrix: every RPC and every hook, driven as agent B against agent A.

A (``owner``) holds a private memory in ``agent:owner`` and a shared one in ``shared:s``.
B is one of four agents whose grants on ``shared:s`` differ: none (the default policy),
write-only, read-only, read-write. Whatever B does, it must learn nothing of A's private
memory (text, id, counts, existence, duplicate_of, idempotency replays) and change
nothing of it; of the shared memory it may see only what it may read, and change only
what it may both read and write. Every RPC of MemoryService, HookService and ReviewService
has a probe here: a new RPC without one fails ``test_every_rpc_has_a_probe``.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb
from memoryd_client._gen.memoryd.v1 import hooks_pb2, hooks_pb2_grpc, review_pb2, review_pb2_grpc
from memoryd_client.client import forget_request, recall_request, store_request, update_request

pytestmark = pytest.mark.integration

SHARED = "shared:s"
CONFIG = f"""
[policy.agents.owner]
read = ["agent:owner", "{SHARED}", "global"]
write = ["agent:owner", "{SHARED}"]
[policy.agents.b-wo]
write = ["agent:b-wo", "{SHARED}"]
[policy.agents.b-ro]
read = ["agent:b-ro", "{SHARED}", "global"]
[policy.agents.b-rw]
read = ["agent:b-rw", "{SHARED}", "global"]
write = ["agent:b-rw", "{SHARED}"]
"""


@dataclass(frozen=True)
class Grant:
    agent: str
    reads_shared: bool
    writes_shared: bool


GRANTS = [
    pytest.param(Grant("b-default", False, False), id="default"),
    pytest.param(Grant("b-wo", False, True), id="write-only"),
    pytest.param(Grant("b-ro", True, False), id="read-only"),
    pytest.param(Grant("b-rw", True, True), id="shared"),
]
PROBED = {
    "MemoryService": {"Store", "Recall", "Forget", "Update", "Get", "List", "Stats",
                      "ListConflicts", "Export", "Import", "Stream"},
    "HookService": {"BuildContext", "Capture"},
    "ReviewService": {"Prepare", "Apply"},
}  # fmt: skip


@pytest.fixture(scope="module")
def matrix_daemon(start_daemon, tmp_path_factory):
    config = tmp_path_factory.mktemp("matrix") / "memoryd.toml"
    config.write_text(CONFIG)
    return start_daemon(env={"MEMORYD_CONFIG": str(config)})


@pytest.fixture
def c(matrix_daemon):
    with MemoryClient(matrix_daemon.address, timeout=30.0, retries=0) as client:
        yield client


@dataclass
class Owned:
    private: pb.Memory
    shared: pb.Memory
    key: str


@pytest.fixture
def owned(c) -> Owned:
    tag = uuid.uuid4().hex[:8]
    key = f"k-{tag}"
    private = c.store(
        "owner", f"The owner's safe code is {tag}, kept in the study.", idempotency_key=key
    ).memory
    shared = c.store("owner", f"The shared printer {tag} jams on duplex jobs.", scope=SHARED)
    return Owned(private, shared.memory, key)


def _never_mentions(value: Any, memory: pb.Memory) -> None:
    text = str(value)
    assert memory.id not in text, f"revealed {memory.id}: {text[:300]}"
    assert memory.text not in text, f"revealed the text of {memory.id}: {text[:300]}"


def _code(call, *args, **kw) -> str:
    try:
        call(*args, **kw)
    except MemorydError as e:
        return e.code.name
    return "OK"


def _content(m: pb.Memory) -> tuple[Any, ...]:
    expires = m.expires_at.ToJsonString() if m.HasField("expires_at") else ""
    return (m.id, m.scope, m.text, m.importance, m.category, dict(m.metadata), m.superseded_by,
            tuple(m.related_ids), expires)  # fmt: skip


def test_every_rpc_has_a_probe():
    from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks
    from memoryd_client._gen.memoryd.v1 import memory_pb2 as memory
    from memoryd_client._gen.memoryd.v1 import review_pb2 as review

    served = {
        "ReviewService": set(review.DESCRIPTOR.services_by_name["ReviewService"].methods_by_name),
        "MemoryService": set(memory.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name),
        "HookService": set(hooks.DESCRIPTOR.services_by_name["HookService"].methods_by_name),
    }
    assert served == PROBED


@pytest.mark.parametrize("grant", GRANTS)
def test_agent_b_learns_and_changes_nothing_it_may_not(matrix_daemon, c, owned, grant):
    b, p, s = grant.agent, owned.private, owned.shared
    owner_before = (c.stats("owner").total, [_content(m) for m in c.list_all("owner")])
    seen: list[Any] = []  # everything B was told, checked for A's private memory at the end

    assert _code(c.store, b, "Planted into A's scope.", scope="agent:owner") == "PERMISSION_DENIED"
    # Store of the shared text into the shared scope: a duplicate only where B may read.
    if grant.writes_shared:
        r = c.store(b, s.text, scope=SHARED)
        if grant.reads_shared:
            assert r.outcome == pb.STORE_OUTCOME_DUPLICATE and r.duplicate_of == s.id
        else:
            assert r.outcome == pb.STORE_OUTCOME_CREATED and not r.duplicate_of
            assert s.id not in str(r)  # (the text is B's own, sent by B)
            c.forget("owner", id=r.memory.id)  # keep A's shared scope as it was
    else:
        assert _code(c.store, b, s.text, scope=SHARED) == "PERMISSION_DENIED"

    # Recall, Get, List, Stats, Export: the shared memory only where readable.
    hits = c.recall(b, s.text, limit=100)
    seen.append(hits)
    assert (s.id in {h.memory.id for h in hits.results}) == grant.reads_shared
    seen.append(c.recall(b, p.text, limit=100))
    assert _code(c.recall, b, p.text, scopes=["agent:owner"]) == "PERMISSION_DENIED"
    hidden = _code(c.get, b, p.id)
    assert hidden == "NOT_FOUND" == _code(c.get, b, str(uuid.uuid4()))
    assert _code(c.get, b, s.id) == ("OK" if grant.reads_shared else "NOT_FOUND")
    listed = c.list_all(b)
    seen.append(listed)
    assert (s.id in {m.id for m in listed}) == grant.reads_shared
    stats = c.stats(b)
    seen.append(stats)
    assert "agent:owner" not in stats.by_scope
    assert (SHARED in stats.by_scope) == grant.reads_shared
    exported = list(c.export(b))
    seen.append(exported)
    assert (s.id in {m.id for m in exported}) == grant.reads_shared
    seen.append(c.conflicts(b))

    # Changes: A's private memory is out of reach; the shared one needs read and write.
    assert _code(c.update, b, p.id, importance=0.01) == "NOT_FOUND"
    assert _code(c.forget, b, id=p.id) == "NOT_FOUND"
    fq = c.forget(b, query=p.text)
    seen.append(fq)
    assert p.id not in fq.deleted_ids
    fq = c.forget(b, query=s.text)
    seen.append(fq)
    if not (grant.reads_shared and grant.writes_shared):
        _never_mentions(fq, s)
    elif s.id in fq.deleted_ids:
        # B may read and write the shared scope: a single strong match is B's to delete
        # (whether it is single depends on the other grants' printers). Put it back as it
        # was (Import keeps id, times and metadata) so the checks below see A's memory.
        assert c.import_memories("owner", [s]).imported == 1
    update_shared = _code(c.update, b, s.id, importance=s.importance)
    if grant.reads_shared and grant.writes_shared:
        assert update_shared == "OK"
    else:
        assert update_shared in {"NOT_FOUND", "PERMISSION_DENIED"}

    # Import: A's id, a supersede of A's memory and links to it change and reveal nothing.
    imported = c.import_memories(
        b,
        [
            pb.Memory(id=p.id, text=f"Import reusing an id {uuid.uuid4().hex}",
                      category=pb.CATEGORY_FACT, importance=0.5),
            pb.Memory(id=str(uuid.uuid4()), text=f"Import superseding {uuid.uuid4().hex}",
                      category=pb.CATEGORY_FACT, importance=0.5, supersedes=p.id,
                      related_ids=(p.id, s.id)),
        ],
    )  # fmt: skip
    assert (imported.imported, imported.skipped_existing, len(imported.errors)) == (2, 0, 0)
    for m in c.list_all(b):
        seen.append(m)
        assert m.id != p.id and p.id not in m.related_ids and m.supersedes != p.id

    # Stream ops, hooks.
    answers = asyncio.run(_stream_probe(matrix_daemon.address, b, p))
    seen += [answers["recall"], answers["forget-q"]]  # (the others echo the id B sent)
    assert answers["update"].error.code_name == "NOT_FOUND"
    assert answers["forget"].error.code_name == "NOT_FOUND"
    assert answers["store-a"].error.code_name == "PERMISSION_DENIED"
    with grpc.insecure_channel(matrix_daemon.address) as channel:
        hooks = hooks_pb2_grpc.HookServiceStub(channel)
        block = hooks.BuildContext(
            hooks_pb2.BuildContextRequest(
                agent_id=b, session_id="m", prompt=f"Do you remember this? {p.text}"
            ),
            timeout=30,
        )
        seen.append(block)
        captured = hooks.Capture(
            hooks_pb2.CaptureRequest(
                agent_id=b,
                session_id="m",
                messages=[hooks_pb2.ChatMessage(role="user", text=f"Remember: {s.text}")],
            ),
            timeout=30,
        )
        seen.append(captured)
        if not grant.reads_shared:
            _never_mentions(block, s)

        seen += _review_probe(channel, b, p, s, grant)

    for told in seen:
        _never_mentions(told, p)
    # A's text in B's own scope is B's own memory; the same idempotency key is B's own.
    r = c.store(b, p.text, idempotency_key=owned.key)
    assert r.outcome == pb.STORE_OUTCOME_CREATED and not r.duplicate_of and r.memory.id != p.id
    assert c.get("owner", p.id).text == p.text
    assert c.get("owner", s.id).text == s.text
    owner_after = (c.stats("owner").total, [_content(m) for m in c.list_all("owner")])
    assert owner_after == owner_before


def _review_probe(
    channel: grpc.Channel, b: str, p: pb.Memory, s: pb.Memory, grant: Grant
) -> list[Any]:
    """ReviewService as B: A's private memory is absent from every proposal, a promotion of
    it is NOT_FOUND like an unknown id, and approved items naming it answer exactly as for
    an unknown id and change nothing."""
    from memoryd.core.review import Action, ActionKind, Kind, item_id

    review = review_pb2_grpc.ReviewServiceStub(channel)
    told: list[Any] = [review.Prepare(review_pb2.PrepareReviewRequest(agent_id=b), timeout=60)]
    for target in (p.id, str(uuid.uuid4())):
        ask = review_pb2.PromotionAsk(memory_id=target, target_scope=SHARED)
        try:
            review.Prepare(
                review_pb2.PrepareReviewRequest(agent_id=b, promotions=[ask]), timeout=60
            )
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        assert code == "NOT_FOUND"
    shared_hash = "sha256:" + "0" * 64
    if grant.reads_shared:
        ask = review_pb2.PromotionAsk(memory_id=s.id, target_scope="global")
        promo = review.Prepare(
            review_pb2.PrepareReviewRequest(agent_id=b, promotions=[ask]), timeout=60
        )
        shared_hash = promo.items[0].memories[0].hash

    def items(victim: str) -> list[review_pb2.ApprovedItem]:
        out = []
        for kind, action in (
            (Kind.STALE, Action(ActionKind.FORGET, victim)),
            (Kind.DUPLICATE, Action(ActionKind.FORGET, victim, keep_id=s.id)),
            (Kind.CONFLICT, Action(ActionKind.SUPERSEDE, victim, keep_id=s.id)),
            (Kind.PROMOTION, Action(ActionKind.PROMOTE, victim, target_scope=SHARED)),
        ):
            hashes = [review_pb2.MemoryHash(id=victim, hash="sha256:" + "1" * 64)]
            if action.keep_id:
                hashes.append(review_pb2.MemoryHash(id=s.id, hash=shared_hash))
            wire = review_pb2.ReviewAction(
                kind=int(action.kind),
                memory_id=victim,
                keep_id=action.keep_id,
                target_scope=action.target_scope,
            )
            out.append(
                review_pb2.ApprovedItem(
                    item_id=item_id(kind, action),
                    kind=int(kind),
                    action=wire,
                    hashes=hashes,
                    approval=review_pb2.APPROVAL_ITEM,
                )
            )
        return out

    unknown = str(uuid.uuid4())
    answers = {}
    for victim in (p.id, unknown):
        r = review.Apply(review_pb2.ApplyReviewRequest(agent_id=b, items=items(victim)), timeout=60)
        assert r.applied == 0
        answers[victim] = [(x.outcome, x.message.replace(victim, "ID")) for x in r.results]
    assert answers[p.id] == answers[unknown]
    return told


async def _stream_probe(address: str, b: str, p: pb.Memory) -> dict[str, pb.StreamResponse]:
    ops = [
        pb.StreamRequest(request_id="recall", recall=recall_request(b, p.text, limit=100)),
        pb.StreamRequest(request_id="update", update=update_request(b, p.id, text="Changed.")),
        pb.StreamRequest(request_id="forget", forget=forget_request(b, id=p.id)),
        pb.StreamRequest(request_id="forget-q", forget=forget_request(b, query=p.text)),
        pb.StreamRequest(
            request_id="store-a", store=store_request(b, "Planted.", scope="agent:owner")
        ),
    ]
    out: dict[str, pb.StreamResponse] = {}
    async with AsyncMemoryClient(address, timeout=60.0) as c:
        async for r in c.stream(ops):
            out[r.request_id] = r
    return out
