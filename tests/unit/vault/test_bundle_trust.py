"""What an agent or a vault writer can put into a bundle never becomes an approval or a
forged note: the vault CLI against a ReviewService in this process (the CLI in a worker
thread, the daemon on the test's event loop)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from markdown_it import MarkdownIt
from memoryd_client import review_pb
from memoryd_client.vault import cli, render

from memoryd.api import convert
from memoryd.core.policy import AccessPolicy, AgentAccess
from memoryd.core.review import ReviewService
from memoryd.core.service import MemoryService, NewMemory, ServiceLimits
from memoryd.storage.repository import Repository

from ..conftest import Clock, WordHashEmbedder

T = TypeVar("T")
TEAM = "workspace:team"


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
