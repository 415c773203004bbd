"""The trust boundary: API keys acting for sets of agents, the operator role, write-only
grants, Import and idempotency keys that reveal nothing of what the caller cannot read.

One daemon with a keys file and a policy: agent ``main`` reads and writes ``shared:box``;
agent ``mallory`` may only write there (a drop box). Keys: ``gw-a`` acts for
``tenant-a-*``, ``main-key`` for ``main``, ``mallory-key`` for ``mallory``, ``ops`` for
every agent as operator.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid

import grpc
import pytest
from memoryd_client import AsyncMemoryClient, MemoryClient, MemorydError, pb, review_pb
from memoryd_client._gen.memoryd.v1 import hooks_pb2, hooks_pb2_grpc
from memoryd_client.vault.state import approved_item

pytestmark = pytest.mark.integration

DENIED = grpc.StatusCode.PERMISSION_DENIED
KEYS = {
    name: f"{name}-secret-{uuid.uuid4().hex}"
    for name in ("gw-a", "main", "mallory", "mallory-reviewer", "ops")
}
BOX = "shared:box"


def _entry(name: str, agents: list[str], operator: bool = False, reviewer: bool = False) -> str:
    digest = hashlib.sha256(KEYS[name].encode()).hexdigest()
    quoted = ", ".join(f'"{a}"' for a in agents)
    return (
        f'[[key]]\nname = "{name}"\nsha256 = "{digest}"\nagents = [{quoted}]\n'
        f"operator = {'true' if operator else 'false'}\n"
        f"reviewer = {'true' if reviewer else 'false'}\n"
    )


KEYS_FILE = (
    _entry("gw-a", ["tenant-a-*"])
    + _entry("main", ["main"])
    + _entry("mallory", ["mallory"])
    + _entry("mallory-reviewer", ["mallory"], reviewer=True)  # the person reviewing mallory
    + _entry("ops", ["*"], operator=True)
)
CONFIG = f"""
[policy.agents.main]
read = ["agent:main", "{BOX}", "global"]
write = ["agent:main", "{BOX}"]
[policy.agents.mallory]
read = ["agent:mallory"]
write = ["agent:mallory", "{BOX}"]
[policy.agents.peer]
read = ["agent:peer", "{BOX}"]
write = ["agent:peer", "{BOX}"]
[auth]
access_log = true
"""


@pytest.fixture(scope="module")
def keys_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.toml"
    path.write_text(KEYS_FILE)
    return path


@pytest.fixture(scope="module")
def secured(start_daemon, keys_path, tmp_path_factory):
    config = tmp_path_factory.mktemp("config") / "memoryd.toml"
    config.write_text(CONFIG)
    return start_daemon(
        env={"MEMORYD_CONFIG": str(config), "MEMORYD_AUTH__KEYS_FILE": str(keys_path)}
    )


@pytest.fixture
def as_key(secured):
    opened: list[MemoryClient] = []

    def make(name: str, secret: str | None = None) -> MemoryClient:
        c = MemoryClient(secured.address, token=secret or KEYS[name], timeout=30.0, retries=0)
        opened.append(c)
        return c

    yield make
    for c in opened:
        c.close()


def _tenant(prefix: str = "tenant-a") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_a_key_acts_only_for_its_agents_on_every_rpc(secured, as_key, rejects):
    gw, ops = as_key("gw-a"), as_key("ops")
    mine, theirs = _tenant(), _tenant("tenant-b")
    kept = ops.store(theirs, "Tenant B's renewal date is the 3rd of May.").memory
    assert gw.store(mine, "Tenant A pays by invoice.").outcome == pb.STORE_OUTCOME_CREATED
    calls = [
        (gw.store, (theirs, "Planted by tenant A."), {}),
        (gw.recall, (theirs, "renewal date"), {}),
        (gw.get, (theirs, kept.id), {}),
        (gw.list, (theirs,), {}),
        (gw.stats, (theirs,), {}),
        (gw.update, (theirs, kept.id), {"importance": 0.1}),
        (gw.forget, (theirs,), {"id": kept.id}),
        (gw.forget, (theirs,), {"query": "renewal date"}),
        (gw.conflicts, (theirs,), {}),
        (lambda *a: list(gw.export(*a)), (theirs,), {}),
    ]
    for call, args, kw in calls:
        rejects(DENIED, call, *args, mentions=["gw-a", theirs], **kw)
    imported = gw.import_memories(theirs, [kept])  # Import answers each row on its own
    assert imported.imported == 0 and [e.code_name for e in imported.errors] == [
        "PERMISSION_DENIED"
    ]
    # Said the same way for an agent that has memories and one that never had any.
    empty = _tenant("tenant-b")
    with_memories = rejects(DENIED, gw.recall, theirs, "renewal date")
    never = rejects(DENIED, gw.recall, empty, "renewal date")
    assert with_memories.replace(theirs, "X") == never.replace(empty, "X")
    assert ops.get(theirs, kept.id).text == kept.text  # untouched
    assert ops.stats(theirs).total == 1


def test_hooks_and_stream_ops_check_the_key_too(secured, as_key):
    theirs = _tenant("tenant-b")
    with grpc.insecure_channel(secured.address) as channel:
        hooks = hooks_pb2_grpc.HookServiceStub(channel)
        auth = (("authorization", f"Bearer {KEYS['gw-a']}"),)
        for call, request in (
            (
                hooks.BuildContext,
                hooks_pb2.BuildContextRequest(
                    agent_id=theirs, session_id="s", prompt="Do you remember my renewal date?"
                ),
            ),
            (
                hooks.Capture,
                hooks_pb2.CaptureRequest(
                    agent_id=theirs,
                    session_id="s",
                    messages=[hooks_pb2.ChatMessage(role="user", text="Remember that I love tea.")],
                ),
            ),
        ):
            with pytest.raises(grpc.RpcError) as caught:
                call(request, timeout=30, metadata=auth)
            assert caught.value.code() == DENIED

    async def run() -> dict[str, pb.StreamResponse]:
        out = {}
        async with AsyncMemoryClient(secured.address, token=KEYS["gw-a"]) as c:
            ops = [
                pb.StreamRequest(request_id="own", store=pb.StoreRequest(agent_id=_tenant(),
                                                                         text="Mine to keep.")),
                pb.StreamRequest(request_id="foreign", store=pb.StoreRequest(agent_id=theirs,
                                                                             text="Not mine.")),
            ]  # fmt: skip
            async for r in c.stream(ops):
                out[r.request_id] = r
        return out

    answers = asyncio.run(run())
    assert answers["own"].WhichOneof("result") == "store"
    assert answers["foreign"].error.code_name == "PERMISSION_DENIED"
    assert as_key("ops").stats(theirs).total == 0


def test_only_operators_see_the_daemon_wide_figures(secured, as_key, rejects):
    gw, ops = as_key("gw-a"), as_key("ops")
    agent = _tenant()
    rejects(DENIED, gw.stats, agent, daemon_wide=True, mentions=["operator"])
    rejects(DENIED, lambda: list(gw.export(agent, all_scopes=True)), mentions=["operator"])
    other = _tenant("tenant-z")
    ops.store(other, "An operator-visible memory of tenant Z.")
    wide = ops.stats(other, daemon_wide=True)
    assert wide.store_rows > ops.stats(other).store_rows == 1
    exported = {m.id for m in ops.export(other, all_scopes=True)}
    assert {m.id for m in ops.list_all(other)} <= exported
    assert len(exported) == wide.store_rows  # nothing here expires or is superseded


def test_stats_figures_do_not_move_with_another_agents_writes(client, new_agent):
    a, b = new_agent(), new_agent()
    client.store(b, "B keeps one memory of its own.")
    before = client.stats(b)
    for i in range(3):
        client.store(a, f"Agent A writes memory number {i} about the harbour.")
    after = client.stats(b)
    assert (after.store_rows, after.index_bytes) == (before.store_rows, before.index_bytes)
    assert after.store_rows == 1 and after.index_bytes > 0


def test_a_write_only_grant_reveals_nothing_through_forget_or_store(secured, as_key, rejects):
    main, mallory = as_key("main"), as_key("mallory")
    text = f"The vault combination is {uuid.uuid4().int % 10**6:06d}."
    kept = main.store("main", text, scope=BOX).memory
    rejects(grpc.StatusCode.NOT_FOUND, mallory.get, "mallory", kept.id)
    r = mallory.forget("mallory", query=text)
    assert not r.deleted_ids and not r.candidates
    # Storing the same text into the drop box is a new memory, not "DUPLICATE of <id>".
    dropped = mallory.store("mallory", text, scope=BOX)
    assert dropped.outcome == pb.STORE_OUTCOME_CREATED
    assert not dropped.duplicate_of and dropped.memory.id != kept.id
    assert not dropped.memory.related_ids
    assert main.get("main", kept.id).text == text


def test_a_retried_store_into_a_drop_box_shows_what_was_sent_not_what_readers_did(secured, as_key):
    """An idempotency key's replay in a scope its caller may only write answers from the
    caller's own request. Before, it showed the memory as it is now: the readers' Update,
    their metadata, its links and Recalls; and it refused a retry whose text no longer
    matched, which told the writer whether a guess of the current text was right."""
    main, mallory = as_key("main"), as_key("mallory")
    key = f"drop-{uuid.uuid4().hex}"
    text = f"Tip {uuid.uuid4().hex[:8]}: the courier is paid in cash on Fridays."
    first = mallory.store("mallory", text, scope=BOX, idempotency_key=key, metadata={"src": "m"})
    assert first.outcome == pb.STORE_OUTCOME_CREATED
    mine = first.memory
    redacted = f"Tip {mine.id[:8]}: checked, nothing in it."
    main.update("main", mine.id, text=redacted, metadata={"triage": "rejected: fake"})
    main.store("main", f"Follow-up on {text}", scope=BOX)  # may link to it
    main.recall("main", redacted, limit=3)
    again = mallory.store("mallory", text, scope=BOX, idempotency_key=key, metadata={"src": "m"})
    assert again.outcome == pb.STORE_OUTCOME_CREATED
    shown = again.memory
    assert (shown.id, shown.scope, shown.text) == (mine.id, BOX, text)
    assert dict(shown.metadata) == {"src": "m"}
    assert not shown.related_ids and not shown.superseded_by and shown.access_count == 0
    # Another text under the key is refused as anywhere, a right guess of the current one
    # included: held to what was sent first, not to what the readers made of it.
    for other in (redacted, "Tip: something else entirely."):
        with pytest.raises(MemorydError) as refused:
            mallory.store("mallory", other, scope=BOX, idempotency_key=key)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "already used" in refused.value.message
    assert main.get("main", mine.id).text == redacted  # the retries wrote nothing


def test_the_conflict_log_shows_only_memories_still_there_as_they_are_now(secured, as_key):
    """ListConflicts keeps an entry only while both its memories exist and the caller may
    read them, and shows their texts as they are now. Before, it served the texts the log
    recorded: a decision forgotten, or redacted by an Update, still showed."""
    main, peer = as_key("main"), as_key("ops")  # the operator key acts for agent peer
    tag = uuid.uuid4().hex[:6]
    texts = [
        f"Decision: project {tag} will deploy to the {city} region on AWS."
        for city in ("Frankfurt", "Dublin", "Paris")
    ]
    ours = main.store("main", texts[0], scope=BOX, category=pb.CATEGORY_DECISION).memory
    forgotten = main.store("main", texts[2], scope=BOX, category=pb.CATEGORY_DECISION).memory
    theirs = peer.store("peer", texts[1], scope=BOX, category=pb.CATEGORY_DECISION).memory

    def logged() -> dict[str, tuple[str, str]]:
        entries = peer.conflicts("peer").conflicts
        return {
            c.existing_id: (c.new_text, c.existing_text) for c in entries if c.new_id == theirs.id
        }

    assert set(logged()) == {ours.id, forgotten.id}, logged()
    main.forget("main", id=forgotten.id)
    redacted = f"Decision: project {tag} deploys in a region to be named."
    main.update("main", ours.id, text=redacted)
    assert logged() == {ours.id: (texts[1], redacted)}


def test_import_cannot_touch_or_probe_another_agents_memories(secured, as_key):
    main, mallory = as_key("main"), as_key("mallory")
    private = main.store("main", f"Main's private note {uuid.uuid4().hex}.").memory
    assert main.recall("main", private.text, limit=1).results[0].memory.id == private.id
    forged = pb.Memory(
        id=str(uuid.uuid4()),
        agent_id="main",
        scope="agent:mallory",
        text="Mallory's memory that claims to replace main's.",
        category=pb.CATEGORY_FACT,
        importance=0.5,
        supersedes=private.id,
        related_ids=(private.id, str(uuid.uuid4())),
    )
    taken = pb.Memory(
        id=private.id, scope="agent:mallory", text="Reusing main's id.", category=pb.CATEGORY_FACT,
        importance=0.5,
    )  # fmt: skip
    random_id = pb.Memory(
        id=str(uuid.uuid4()), scope="agent:mallory", text="A fresh id.", category=pb.CATEGORY_FACT,
        importance=0.5,
    )  # fmt: skip
    r = mallory.import_memories("mallory", [forged, taken, random_id])
    # An id held by a memory mallory cannot read imports like a free one: no oracle.
    assert (r.imported, r.skipped_existing, list(r.errors)) == (3, 0, [])
    got = mallory.get("mallory", forged.id)
    assert got.agent_id == "mallory" and not got.supersedes and not list(got.related_ids)
    mine = {m.text: m for m in mallory.list_all("mallory")}
    assert mine["Reusing main's id."].id != private.id
    # main's memory is as it was: recalled, not superseded, no back-links from mallory.
    after = main.get("main", private.id)
    assert after.text == private.text and not after.superseded_by
    assert not list(after.related_ids)
    assert main.recall("main", private.text, limit=1).results[0].memory.id == private.id


def test_import_keeps_links_and_supersession_within_the_agents_scope(client, new_agent):
    agent = new_agent()
    older, newer = str(uuid.uuid4()), str(uuid.uuid4())
    rows = [  # newest first, as Export lists them
        pb.Memory(id=newer, scope=f"agent:{agent}", text="The team now meets on Tuesdays.",
                  category=pb.CATEGORY_DECISION, importance=0.7, supersedes=older,
                  related_ids=(older,)),
        pb.Memory(id=older, scope=f"agent:{agent}", text="The team meets on Mondays.",
                  category=pb.CATEGORY_DECISION, importance=0.7, superseded_by=newer,
                  related_ids=(newer,)),
    ]  # fmt: skip
    r = client.import_memories(agent, rows)
    assert (r.imported, list(r.errors)) == (2, [])
    assert client.get(agent, newer).supersedes == older
    assert client.get(agent, older).superseded_by == newer
    assert list(client.get(agent, older).related_ids) == [newer]
    hits = [h.memory.id for h in client.recall(agent, "when does the team meet", limit=5).results]
    assert hits == [newer]  # the superseded one is history, not recalled


def test_an_idempotency_key_replays_a_duplicate_answer(client, new_agent, rejects):
    agent = new_agent()
    first = client.store(agent, "The boiler is serviced every September.").memory
    again = client.store(agent, "The boiler is serviced every September.", idempotency_key="k1")
    assert again.outcome == pb.STORE_OUTCOME_DUPLICATE and again.duplicate_of == first.id
    # The key is used: other text under it is refused, not CREATED.
    rejects(
        grpc.StatusCode.INVALID_ARGUMENT,
        client.store,
        agent,
        "The boiler is replaced next year.",
        idempotency_key="k1",
        mentions=["k1", "already used"],
    )
    replay = client.store(agent, "The boiler is serviced every September.", idempotency_key="k1")
    assert replay.outcome == pb.STORE_OUTCOME_DUPLICATE and replay.duplicate_of == first.id
    assert client.stats(agent).total == 1


def test_keys_file_changes_apply_without_a_restart(secured, as_key, keys_path, rejects):
    fresh = f"late-key-secret-{uuid.uuid4().hex}"
    late = as_key("late", fresh)
    agent = _tenant("tenant-late")
    rejects(grpc.StatusCode.UNAUTHENTICATED, late.stats, agent)
    digest = hashlib.sha256(fresh.encode()).hexdigest()
    keys_path.write_text(
        KEYS_FILE + f'[[key]]\nname = "late"\nsha256 = "{digest}"\nagents = ["tenant-late-*"]\n'
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            assert late.stats(agent).total == 0
            break
        except MemorydError as e:
            assert e.code == grpc.StatusCode.UNAUTHENTICATED
            assert time.monotonic() < deadline, "the new key was not picked up"
            time.sleep(0.2)
    # A file that does not parse keeps the keys in force.
    keys_path.write_text("this is = not [valid toml")
    deadline = time.monotonic() + 20  # the watcher has seen the broken file once it says so
    while "not reloaded" not in secured.log_path.read_text():
        assert time.monotonic() < deadline, "the broken keys file was never read"
        time.sleep(0.2)
    assert late.stats(agent).total == 0
    keys_path.write_text(KEYS_FILE)  # the module's other tests see the original keys


def _wait_for_reload(client: MemoryClient, agent: str, code: grpc.StatusCode | None) -> None:
    """Until a unary call of ``client`` for ``agent`` answers ``code`` (None: OK)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            client.stats(agent)
            got = None
        except MemorydError as e:
            got = e.code
        if got == code:
            return
        assert time.monotonic() < deadline, f"the keys file was not reloaded ({got})"
        time.sleep(0.2)


async def test_an_open_stream_follows_its_keys_changes_and_ends_when_its_key_is_revoked(
    secured, as_key, keys_path
):
    """A Stream resolves its credential again after a reload of the keys file: an agent
    taken off the key is refused from the next op on, and a revoked key ends the call
    (UNAUTHENTICATED) before its next op runs. Before, the stream kept the credential it
    opened with until the client hung up."""
    from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc

    secret = f"stream-key-secret-{uuid.uuid4().hex}"
    digest = hashlib.sha256(secret.encode()).hexdigest()
    kept, dropped = _tenant("tenant-kept"), _tenant("tenant-dropped")

    def entry(agents: str) -> str:
        return f'[[key]]\nname = "streamer"\nsha256 = "{digest}"\nagents = [{agents}]\n'

    ops = as_key("ops")
    unary = as_key("streamer", secret)
    keys_path.write_text(KEYS_FILE + entry('"tenant-kept-*", "tenant-dropped-*"'))
    _wait_for_reload(unary, dropped, None)

    def store(rid: str, agent: str) -> pb.StreamRequest:
        return pb.StreamRequest(
            request_id=rid, store=pb.StoreRequest(agent_id=agent, text=f"{rid} fact")
        )

    try:
        async with grpc.aio.insecure_channel(secured.address) as channel:
            call = memory_pb2_grpc.MemoryServiceStub(channel).Stream(
                metadata=(("authorization", f"Bearer {secret}"),)
            )
            await call.write(store("1", dropped))
            assert (await asyncio.wait_for(call.read(), 30)).store.memory.id
            # The key loses one of its agents: the open stream follows.
            keys_path.write_text(KEYS_FILE + entry('"tenant-kept-*"'))
            _wait_for_reload(unary, dropped, grpc.StatusCode.PERMISSION_DENIED)
            await call.write(store("2", dropped))
            refused = await asyncio.wait_for(call.read(), 30)
            assert refused.error.code == grpc.StatusCode.PERMISSION_DENIED.value[0], refused
            await call.write(store("3", kept))
            assert (await asyncio.wait_for(call.read(), 30)).store.memory.id
            # The key is revoked: the stream ends before its next op runs.
            keys_path.write_text(KEYS_FILE)
            _wait_for_reload(unary, kept, grpc.StatusCode.UNAUTHENTICATED)
            await call.write(store("4", kept))
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                while True:
                    frame = await asyncio.wait_for(call.read(), 30)
                    assert frame is not grpc.aio.EOF, "the stream ended without an error"
                    raise AssertionError(f"an op ran after the revocation: {frame}")
            assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "no longer in the keys file" in (ended.value.details() or "")
    finally:
        keys_path.write_text(KEYS_FILE)  # the module's other tests see the original keys
    assert ops.stats(dropped).total == 1  # op 1 only
    assert ops.stats(kept).total == 1  # op 3 only: op 4 never ran


async def test_a_streamed_op_paced_across_a_revocation_never_runs(start_daemon, tmp_path):
    """An op read before its key was revoked, and then held back by the rate limits (or
    waiting for a free slot), is checked again when it is about to run: the stream ends
    UNAUTHENTICATED and the op never runs. Before, it ran with the revoked key."""
    from memoryd_client._gen.memoryd.v1 import memory_pb2_grpc

    secrets_ = {n: f"{n}-secret-{uuid.uuid4().hex}" for n in ("paced", "probe", "ops")}

    def entry(name: str, agents: str, operator: bool = False) -> str:
        digest = hashlib.sha256(secrets_[name].encode()).hexdigest()
        flag = "true" if operator else "false"
        return (
            f'[[key]]\nname = "{name}"\nsha256 = "{digest}"\n'
            f"agents = [{agents}]\noperator = {flag}\n"
        )

    keys = tmp_path / "keys.toml"
    ops_entry = entry("ops", '"*"', operator=True)
    keys.write_text(ops_entry + entry("paced", '"tenant-p-*"') + entry("probe", '"probe-*"'))
    # 0.1 requests/s, a burst of 1: the paced key's second op waits ~10 s after it is read
    daemon = start_daemon(
        env={
            "MEMORYD_AUTH__KEYS_FILE": str(keys),
            "MEMORYD_LIMITS__REQUESTS_PER_SECOND": "0.1",
            "MEMORYD_LIMITS__REQUEST_BURST": "1",
        }
    )
    agent = _tenant("tenant-p")
    probe = MemoryClient(daemon.address, token=secrets_["probe"], timeout=30.0, retries=0)
    ops = MemoryClient(daemon.address, token=secrets_["ops"], timeout=30.0, retries=0)

    def store(rid: str) -> pb.StreamRequest:
        return pb.StreamRequest(
            request_id=rid, store=pb.StoreRequest(agent_id=agent, text=f"{rid}: the fact")
        )

    try:
        async with grpc.aio.insecure_channel(daemon.address) as channel:
            call = memory_pb2_grpc.MemoryServiceStub(channel).Stream(
                metadata=(("authorization", f"Bearer {secrets_['paced']}"),)
            )
            await call.write(store("first"))
            assert (await asyncio.wait_for(call.read(), 30)).store.memory.id
            await call.write(store("paced"))  # read, then held back by the rate
            # Revoke the key (and the probe's, to see when the reload is in force).
            keys.write_text(ops_entry)
            started = time.monotonic()
            await asyncio.to_thread(
                _wait_for_reload, probe, "probe-1", grpc.StatusCode.UNAUTHENTICATED
            )
            assert time.monotonic() - started < 8, "reloaded too late for the paced op"
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                frame = await asyncio.wait_for(call.read(), 30)
                raise AssertionError(f"the paced op ran after the revocation: {frame}")
            assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        probe.close()
    try:
        assert ops.stats(agent).total == 1  # the first op only
    finally:
        ops.close()


def test_the_access_log_names_who_did_what_but_never_the_text(secured, as_key):
    agent = _tenant()
    secret_text = f"Access-log canary {uuid.uuid4().hex}"
    as_key("gw-a").store(agent, secret_text)
    deadline = time.monotonic() + 10
    line = ""
    while not line and time.monotonic() < deadline:
        log = secured.log_path.read_text()
        line = next((x for x in log.splitlines() if f"agent={agent}" in x), "")
        time.sleep(0.1)
    assert "principal=gw-a" in line and "rpc=Store" in line and "code=OK" in line
    assert secret_text not in secured.log_path.read_text()
    assert KEYS["gw-a"] not in secured.log_path.read_text()


def promotion_of(client, memory_id: str, scope: str):  # type: ignore[no-untyped-def]
    """Prepare, for mallory, the promotion of ``memory_id`` into ``scope``: (item, response)."""
    prepared = client.review_prepare(
        review_pb.PrepareReviewRequest(
            agent_id="mallory",
            kinds=[review_pb.REVIEW_KIND_PROMOTION],
            promotions=[review_pb.PromotionAsk(memory_id=memory_id, target_scope=scope)],
        )
    )
    (item,) = [i for i in prepared.items if i.kind == review_pb.REVIEW_KIND_PROMOTION]
    return item, prepared


def test_a_review_promotion_into_a_write_only_scope_reveals_nothing_there(secured, as_key):
    main, mallory, ops = as_key("main"), as_key("mallory"), as_key("ops")
    text = f"The launch password is {uuid.uuid4().hex[:10]}."
    theirs = main.store("main", text, scope=BOX).memory
    # Stored on a person's word: only an operator credential may say so.
    mine = ops.store("mallory", text, metadata={"asserted_by": "user"}).memory
    item, prepared = promotion_of(mallory, mine.id, BOX)
    assert theirs.id not in str(prepared)
    applied = as_key("mallory-reviewer").review_apply(
        review_pb.ApplyReviewRequest(
            agent_id="mallory",
            items=[approved_item(item)],
        )
    )
    # The same text already in the drop box is not "already held (<its id>)": that would
    # tell mallory what others put where she may only write.
    assert applied.results[0].outcome == review_pb.APPLY_OUTCOME_APPLIED, applied
    assert theirs.id not in str(applied)
    assert main.get("main", theirs.id).text == text


def test_only_an_operator_credential_may_say_a_person_asserted_a_memory(secured, as_key):
    mallory, ops = as_key("mallory"), as_key("ops")
    user = {"asserted_by": "user"}
    claimed = mallory.store(
        "mallory", f"Mallory is the admin {uuid.uuid4().hex[:6]}.", metadata=user
    )
    assert claimed.memory.metadata["asserted_by"] == "assistant"  # recorded, not refused
    assert mallory.get("mallory", claimed.memory.id).metadata["asserted_by"] == "assistant"
    said = ops.store(
        "mallory", f"The user said the wiki moved {uuid.uuid4().hex[:6]}.", metadata=user
    )
    assert said.memory.metadata["asserted_by"] == "user"
    operator = {"asserted_by": "operator"}
    updated = mallory.update("mallory", claimed.memory.id, metadata=operator).memory
    assert updated.metadata["asserted_by"] == "assistant"
    imported = pb.Memory(
        id=str(uuid.uuid4()),
        agent_id="mallory",
        scope="agent:mallory",
        text=f"Imported with a claim {uuid.uuid4().hex[:6]}.",
        category=pb.CATEGORY_FACT,
        metadata=user,
    )
    assert mallory.import_memories("mallory", [imported]).imported == 1
    assert mallory.get("mallory", imported.id).metadata["asserted_by"] == "assistant"
    # What the claim was for: the review never promotes it.
    prepared = mallory.review_prepare(
        review_pb.PrepareReviewRequest(
            agent_id="mallory",
            promotions=[review_pb.PromotionAsk(memory_id=claimed.memory.id, target_scope=BOX)],
        )
    )
    (item,) = [i for i in prepared.items if i.kind == review_pb.REVIEW_KIND_PROMOTION]
    assert "asserted_by='assistant'" in item.blocked


def test_a_client_cannot_claim_an_item_approval_for_an_item_it_was_not_given(secured, as_key):
    from memoryd.core.review import Action, ActionKind, Kind, item_id

    ops, mallory = as_key("ops"), as_key("mallory")
    m = ops.store(
        "mallory", f"The door code is {uuid.uuid4().hex[:6]}.", metadata={"asserted_by": "user"}
    )
    memory = m.memory
    # The hash is public (any Prepare over the memory shows it); the item is made up: a
    # promotion into the drop box nobody proposed, "approved by itself".
    probe = mallory.review_prepare(
        review_pb.PrepareReviewRequest(
            agent_id="mallory",
            promotions=[review_pb.PromotionAsk(memory_id=memory.id, target_scope="agent:mallory")],
        )
    )
    hashes = {x.id: x.hash for i in probe.items for x in i.memories}
    action = Action(ActionKind.PROMOTE, memory.id, target_scope=BOX)
    invented = review_pb.ApprovedItem(
        item_id=item_id(Kind.PROMOTION, action),
        kind=review_pb.REVIEW_KIND_PROMOTION,
        action=review_pb.ReviewAction(
            kind=review_pb.REVIEW_ACTION_KIND_PROMOTE, memory_id=memory.id, target_scope=BOX
        ),
        hashes=[review_pb.MemoryHash(id=memory.id, hash=hashes[memory.id])],
        approval=review_pb.APPROVAL_ITEM,
        bundle_id=probe.bundle_id,
        signature=probe.items[0].signature,  # another item's signature
    )
    applied = mallory.review_apply(
        review_pb.ApplyReviewRequest(agent_id="mallory", items=[invented])
    )
    assert applied.results[0].outcome == review_pb.APPLY_OUTCOME_CONFLICT, applied
    assert "signature does not verify" in applied.results[0].message
    assert mallory.get("mallory", memory.id).scope == "agent:mallory"


def test_only_a_reviewer_approves_an_agents_memory_into_a_shared_scope(secured, as_key):
    """The agent's own key may prepare and apply, but its approval of a move into a scope
    others read is not a person's: refused; the reviewer's key applies the same item."""
    mallory, ops = as_key("mallory"), as_key("ops")
    mine = ops.store(
        "mallory", f"The user's team is {uuid.uuid4().hex[:8]}.", metadata={"asserted_by": "user"}
    ).memory
    item, _ = promotion_of(mallory, mine.id, BOX)
    request = review_pb.ApplyReviewRequest(agent_id="mallory", items=[approved_item(item)])

    refused = mallory.review_apply(request)
    assert refused.results[0].outcome == review_pb.APPLY_OUTCOME_REFUSED, refused
    assert "needs a reviewer's approval" in refused.results[0].message
    assert mallory.get("mallory", mine.id).scope == "agent:mallory"  # nothing moved

    applied = as_key("mallory-reviewer").review_apply(request)
    assert applied.results[0].outcome == review_pb.APPLY_OUTCOME_APPLIED, applied
