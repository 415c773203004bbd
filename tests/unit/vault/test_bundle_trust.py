"""What an agent or a vault writer can put into a bundle never becomes an approval or a
forged note: the vault CLI against a ReviewService in this process (the CLI in a worker
thread, the daemon on the test's event loop), with the state file edited in between as
someone who can write the vault (but holds neither the daemon's key nor the approval key)
would."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from google.protobuf import json_format
from markdown_it import MarkdownIt
from memoryd_client import pb, review_pb
from memoryd_client.vault import cli, render
from memoryd_client.vault.state import shown_hash, unmatched_memories

from memoryd.api import convert
from memoryd.core.policy import AccessPolicy, AgentAccess
from memoryd.core.records import Category, Memory
from memoryd.core.review import (
    Approval,
    Approved,
    Kind,
    Outcome,
    PrepareQuery,
    ReviewService,
    stale_item,
)
from memoryd.core.service import MemoryService, NewMemory, ServiceLimits
from memoryd.storage.repository import Repository

from ..conftest import Clock, WordHashEmbedder

T = TypeVar("T")
TEAM = "workspace:team"
TABS_A = "the user likes tabs for indentation in python code"
TABS_B = "the user dislikes tabs for indentation in python code"


class LocalDaemon:
    """The CLI's client, answered by ``review`` on ``loop`` (the CLI runs in a thread)."""

    def __init__(self, review: ReviewService, loop: asyncio.AbstractEventLoop) -> None:
        self.review, self.loop = review, loop

    def __enter__(self) -> LocalDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def _run(self, coro: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)  # type: ignore[arg-type]

    def review_prepare(
        self, req: review_pb.PrepareReviewRequest
    ) -> review_pb.PrepareReviewResponse:
        prepared = self._run(self.review.prepare(convert.prepare_review_request(req)))
        return convert.prepare_review_response(prepared)

    def review_apply(self, req: review_pb.ApplyReviewRequest) -> review_pb.ApplyReviewResponse:
        items = convert.apply_review_request(req)
        return convert.apply_review_response(self._run(self.review.apply(req.agent_id, items)))


@pytest.fixture
def memories(
    open_repository: Callable[[], Repository], embedder: WordHashEmbedder, clock: Clock
) -> MemoryService:
    policy = AccessPolicy(
        agents={
            agent: AgentAccess(read=(f"agent:{agent}", TEAM), write=(f"agent:{agent}", TEAM))
            for agent in ("main", "mallory")
        }
    )
    return MemoryService(open_repository(), embedder, policy, ServiceLimits(max_chars=500), clock)


@pytest.fixture
async def vault(
    memories: MemoryService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., Awaitable[tuple[int, str]]]:
    """``await vault("review", "prepare")``: the CLI for agent main over the vault in
    tmp_path/vault, answered by a ReviewService over ``memories``."""
    daemon = LocalDaemon(ReviewService(memories), asyncio.get_running_loop())
    monkeypatch.setattr(cli.Vault, "client", lambda self: daemon)
    (tmp_path / "vault").mkdir()

    async def run(*argv: str) -> tuple[int, str]:
        args = ["--vault", str(tmp_path / "vault"), "--agent", "main", *argv]
        code = await asyncio.to_thread(cli.main, args)
        out = capsys.readouterr()
        return code, out.out + out.err

    return run


def bundle_dir(tmp_path: Path) -> Path:
    return tmp_path / "vault/00-system/memoryd/review-bundles"


def edit_state(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> str:
    """What a vault writer does to the one bundle's state file; returns the bundle id."""
    (path,) = bundle_dir(tmp_path).glob("*.state.json")
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw))
    return str(raw["bundle_id"])


async def put(memories: MemoryService, text: str, **kw: Any) -> Memory:
    return (await memories.store_memory(NewMemory(agent_id="main", text=text, **kw))).memory


async def a_conflict_and_an_expired_memory(
    memories: MemoryService, clock: Clock
) -> tuple[Memory, Memory, Memory]:
    """A high-risk conflict (the newer supersedes the older) and a low-risk stale item (an
    expired memory the sweeper has not removed yet)."""
    old = await put(memories, TABS_A, category=Category.PREFERENCE)
    clock.advance(minutes=1)
    new = await put(memories, TABS_B, category=Category.PREFERENCE)
    expired = await put(memories, "the standup moved to room four", ttl="session")
    clock.advance(days=2)
    return old, new, expired


def relabel_every_item_low(raw: dict[str, Any]) -> None:
    for item in raw["items"]:
        item["risk"] = "RISK_CLASS_LOW"


async def test_a_high_risk_item_relabelled_low_in_the_vault_is_never_applied_in_bulk(
    vault: Any, memories: MemoryService, clock: Clock, tmp_path: Path
) -> None:
    old, _, expired = await a_conflict_and_an_expired_memory(memories, clock)
    code, out = await vault("review", "prepare")
    assert code == 0 and "conflict  high" in out and "stale     low" in out, out
    b = edit_state(tmp_path, relabel_every_item_low)
    code, out = await vault("review", "approve", b, "--items", "low-risk")
    assert code == 0 and "approved 2 item(s)" in out  # the file says both are low risk
    code, out = await vault("review", "apply", b)
    assert code == 1 and "applied 1" in out and "refused 1" in out, out
    assert "classed it high risk" in out
    assert memories.get("main", old.id).superseded_by == ""  # the conflict: not applied
    assert memories.store.get(expired.id) is None  # the one the daemon classed low: applied


def rewrite_text(raw: dict[str, Any], rehash: bool) -> None:
    for item in raw["items"]:
        for m in item["memories"]:
            m["text"] = "harmless duplicate"
            if rehash:  # the hash of what is now shown: anyone can compute it
                m["hash"] = shown_hash(json_format.ParseDict(m, review_pb.ReviewMemory()))


async def test_a_text_edited_in_the_vault_is_never_the_text_approved(
    vault: Any, memories: MemoryService, clock: Clock, tmp_path: Path
) -> None:
    old, _, expired = await a_conflict_and_an_expired_memory(memories, clock)
    assert (await vault("review", "prepare"))[0] == 0
    # The text changed, its signed hash left: the CLI refuses the bundle.
    b = edit_state(tmp_path, lambda raw: rewrite_text(raw, rehash=False))
    note_before = (bundle_dir(tmp_path) / f"{b}.md").read_text()
    code, out = await vault("review", "approve", b, "--items", "all")
    assert code == 2 and "do not match the hash stored with it" in out
    assert (bundle_dir(tmp_path) / f"{b}.md").read_text() == note_before  # not re-rendered
    assert (await vault("review", "apply", b))[0] == 2
    # The hash made to match the new text: the daemon's signature no longer verifies.
    edit_state(tmp_path, lambda raw: rewrite_text(raw, rehash=True))
    assert (await vault("review", "approve", b, "--items", "all"))[0] == 0
    code, out = await vault("review", "apply", b)
    assert code == 1 and "conflicts 2" in out and "signature does not verify" in out
    assert memories.get("main", old.id).superseded_by == ""
    assert memories.store.get(expired.id) is not None


async def test_the_cli_checks_a_memory_with_the_hash_the_daemon_signs(
    memories: MemoryService, clock: Clock
) -> None:
    """Every field the daemon's hash covers reaches the CLI, so the two agree for a memory
    that expires, supersedes, is superseded, was promoted and has a provenance; and a
    change to any of them is caught."""
    old, new, expiring = await a_conflict_and_an_expired_memory(memories, clock)
    said = await put(
        memories, "the release train leaves on tuesdays", metadata={"asserted_by": "user"}
    )
    review = ReviewService(memories)
    conflict = (await review.prepare(PrepareQuery("main", kinds=frozenset({Kind.CONFLICT})))).items
    (ask,) = (
        await review.prepare(
            PrepareQuery("main", kinds=frozenset({Kind.PROMOTION}), promotions=((said.id, TEAM),))
        )
    ).items
    results = await review.apply(
        "main",
        [
            Approved(
                i.item_id,
                i.kind,
                i.action,
                {m.id: h for m, h in zip(i.memories, i.hashes, strict=True)},
                Approval.ITEM,
                i.bundle_id,
                i.signature,
            )
            for i in [*conflict, ask]
        ],
    )
    assert [r.outcome for r in results] == [Outcome.APPLIED, Outcome.APPLIED]
    copy_id = results[1].changed_ids[1]
    shown = [memories.store.get(i) for i in (old.id, new.id, expiring.id, copy_id)]
    assert None not in shown
    superseded, superseding, expired, copy = shown
    assert superseded and superseded.superseded_by and superseding and superseding.supersedes
    assert expired and expired.expires_at and copy and copy.metadata["promoted_from"] == said.id
    now = clock()
    items = [convert.review_item_to_pb(stale_item(m, "why", now)) for m in shown if m]
    assert unmatched_memories(items) == []
    edits: dict[str, Any] = {
        "text": "harmless",
        "scope": "agent:other",
        "agent_id": "other",
        "category": pb.CATEGORY_FACT,
        "asserted_by": "operator",
        "supersedes": "",
        "superseded_by": "",
        "promoted_from": "",
    }
    caught = set()
    for field, value in edits.items():
        for item in items:
            edited = review_pb.ReviewItem()
            edited.CopyFrom(item)
            m = edited.memories[0]
            if getattr(m, field) == value:
                continue
            setattr(m, field, value)
            assert unmatched_memories([edited]) == [(edited.item_id, m.id)], field
            caught.add(field)
    assert caught == set(edits)
    later = review_pb.ReviewItem()
    later.CopyFrom(items[2])
    later.memories[0].expires_at.seconds += 86_400
    assert unmatched_memories([later]) == [(later.item_id, expiring.id)]


# -- an agent's metadata in another person's bundle note ----------------------------------

# A forged end marker (the block would count as edited by a person and never be updated
# again), a heading and a link whose bracket a backslash would un-escape.
EVIL = "\n<!-- memoryd:managed:end id=body -->\n## \\[go](http://e.vil)\n"  # 59 shown
AUTOLINK = re.compile(r"(?i)\b(?:https?|ftp)://|\bwww\.|[\w.+-]+@[\w-]+\.\w")


async def test_an_agents_metadata_forges_nothing_in_another_persons_bundle_note(
    vault: Any, memories: MemoryService, clock: Clock, tmp_path: Path
) -> None:
    await memories.store_memory(
        NewMemory(
            agent_id="mallory",
            text="the team standup is at nine",
            scope=TEAM,
            metadata={"asserted_by": EVIL},
        )
    )
    clock.advance(days=120)  # not recalled for 90 days: a stale proposal for main
    code, out = await vault("review", "prepare", "--kinds", "stale")
    assert code == 0 and "1 proposals" in out, out
    (note,) = bundle_dir(tmp_path).glob("*.md")
    text = note.read_text()
    assert text.count("<!-- memoryd:managed:end") == 1  # memoryd's own
    tokens = MarkdownIt("commonmark").parse(render.split_front_matter(text) or "")
    kinds = [t.type for t in tokens] + [c.type for t in tokens for c in t.children or []]
    assert kinds.count("html_block") == 2  # memoryd's start and end markers
    assert "link_open" not in kinds and "html_inline" not in kinds
    assert [t.tag for t in tokens if t.type == "heading_open"] == ["h1", "h2", "h3"]
    (line,) = [line for line in text.splitlines() if "asserted_by" in line]
    shown = line.partition("asserted_by ")[2].partition(", hash ")[0]
    assert "e.vil" in shown and "…" not in shown and AUTOLINK.search(shown) is None
    # The next write (a decision) finds the block as memoryd left it and replaces it.
    b = note.stem
    (item_id,) = [json.loads(note.with_suffix(".state.json").read_text())["items"][0]["itemId"]]
    assert (await vault("review", "reject", b, "--items", item_id))[0] == 0
    log = (tmp_path / "vault/00-system/memoryd/managed-blocks.log.jsonl").read_text()
    assert json.loads(log.splitlines()[-1])["action"] == "replaced"
    assert "**rejected**" in note.read_text()


async def test_an_item_of_another_bundle_planted_in_a_state_file_is_never_approved(
    vault: Any, memories: MemoryService, clock: Clock, tmp_path: Path
) -> None:
    """An item the daemon signed for another bundle (one the person rejected, say) copied
    into this bundle's state file: approving "all" would seal it with this bundle and
    apply it, though its note never showed it. The CLI refuses the bundle instead."""
    old, _, expired = await a_conflict_and_an_expired_memory(memories, clock)
    assert (await vault("review", "prepare"))[0] == 0

    def plant(raw: dict[str, Any]) -> None:
        item = raw["items"][0]
        key = "bundleId" if "bundleId" in item else "bundle_id"
        item[key] = "rb-20260101-000000-beef"

    b = edit_state(tmp_path, plant)
    code, out = await vault("review", "approve", b, "--items", "all")
    assert code == 2 and "belongs to bundle 'rb-20260101-000000-beef'" in out, out
    assert (await vault("review", "apply", b))[0] == 2
    assert memories.get("main", old.id).superseded_by == ""
    assert memories.store.get(expired.id) is not None


async def test_what_a_vault_writer_puts_in_a_state_file_cannot_drive_the_terminal(
    vault: Any, memories: MemoryService, clock: Clock, tmp_path: Path
) -> None:
    """`review show` prints fields of the state file (here an item's `blocked` reason):
    an ESC sequence or a carriage return there is shown as its escape, never sent raw to
    the person's terminal, where it could erase or rewrite the lines read before approving."""
    await a_conflict_and_an_expired_memory(memories, clock)
    assert (await vault("review", "prepare"))[0] == 0
    forged = "\x1b[1A\x1b[2K\r  all items low risk, safe to approve\x1b]0;title\x07\u202e"

    def forge(raw: dict[str, Any]) -> None:
        raw["items"][0]["blocked"] = forged

    b = edit_state(tmp_path, forge)
    code, out = await vault("review", "show", b)
    assert code == 0
    assert not any(c in out for c in "\x1b\r\x07\u202e"), repr(out)
    assert "\\x1b[1A\\x1b[2K\\r  all items low risk" in out
