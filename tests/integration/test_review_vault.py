"""The review vault end to end against a real daemon: two agents, duplicates and a conflict
prepared into a bundle, partial approval applied, a memory changed between prepare and
apply refused as a conflict, a second apply a no-op, a note edited by hand applying
nothing, the vault deleted mid-run changing nothing in memory, and the dashboards of a
seeded store checked against Stats."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memoryd_client import MemoryClient, pb
from memoryd_client.vault.cli import main as vault
from memoryd_client.vault.state import approved_item

pytestmark = pytest.mark.integration

TEAM = "workspace:team"
POLICY = {
    "MEMORYD_POLICY__DEFAULT_READ": json.dumps(["agent:{agent_id}", TEAM, "global"]),
    "MEMORYD_POLICY__DEFAULT_WRITE": json.dumps(["agent:{agent_id}", TEAM]),
}
# Pairs the built-in model puts in the near-duplicate band (0.85-0.95): Store keeps both.
HENRY = ("Henry is allergic to cats", "Henry has a cat allergy")
HIKING = ("The user enjoys hiking in the Alps", "The user loves going hiking in the Alps")
CAROL = ("Carol runs the Berlin office", "Carol manages the Berlin office")
POSTGRES = (
    "We decided to use PostgreSQL for the billing service",
    "We decided not to use PostgreSQL for the billing service",
)


@pytest.fixture(autouse=True)
def private_config_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approval key lives in $XDG_CONFIG_HOME: never the real one in a test."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config-home")))


@pytest.fixture(scope="module")
def address(start_daemon: Callable[..., Any]) -> str:
    return str(start_daemon(env=POLICY).address)


@pytest.fixture
def client(address: str) -> Iterator[MemoryClient]:
    with MemoryClient(address, timeout=30.0, retries=0) as c:
        yield c


def state(client: MemoryClient, agent: str) -> dict[str, dict[str, Any]]:
    """Every memory the agent reads, by id: what it is (not how often it was recalled)."""
    out = {}
    for m in client.list_all(agent):
        out[m.id] = {
            "scope": m.scope,
            "text": m.text,
            "meta": dict(m.metadata),
            "superseded_by": m.superseded_by,
            "updated": m.updated_at.ToJsonString(),
        }
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = vault(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_review_two_agents_partial_approval_conflicts_and_idempotency(
    client: MemoryClient, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = "rev-a", "rev-b"
    henry = [client.store(a, t).memory for t in HENRY]
    hiking = [client.store(a, t).memory for t in HIKING]
    pg = [client.store(a, t, category=pb.CATEGORY_DECISION).memory for t in POSTGRES]
    said = client.store(
        a, "The quarterly review is every first Monday", metadata={"asserted_by": "user"}
    ).memory
    guessed = client.store(
        a, "The user probably prefers short answers", metadata={"asserted_by": "assistant"}
    ).memory
    carol = [client.store(b, t).memory for t in CAROL]
    for m in [*henry, *hiking, *pg, *carol]:
        assert m.id, (
            "every memory of a pair is created (the pairs sit under the duplicate threshold)"
        )

    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    base = ["--vault", str(vault_dir), "--agent", a, "--address", address]
    code, out = run(
        capsys,
        *base,
        "review",
        "prepare",
        "--promote",
        f"{said.id}={TEAM}",
        "--promote",
        f"{guessed.id}={TEAM}",
    )
    assert code == 0, out
    bundles = sorted((vault_dir / "00-system/memoryd/review-bundles").glob("rb-*.md"))
    assert len(bundles) == 1
    bundle = bundles[0].stem
    note = bundles[0].read_text()
    assert note.startswith('---\ntype: "memoryd-review-bundle"\n')
    for key in (
        'bundleId: "' + bundle + '"',
        'status: "pending_user_review"',
        'applyMode: "approval_required"',
        "created: ",
    ):
        assert key in note

    code, out = run(capsys, *base, "review", "show", bundle, "--json")
    items = {i["itemId"]: i for i in json.loads(out)["items"]}

    def find(kind: str, ids: set[str]) -> str:
        (found,) = [
            k
            for k, i in items.items()
            if i["kind"] == kind and {m["id"] for m in i["memories"]} == ids
        ]
        return found

    dup_henry = find("REVIEW_KIND_DUPLICATE", {m.id for m in henry})
    dup_hiking = find("REVIEW_KIND_DUPLICATE", {m.id for m in hiking})
    conflict = find("REVIEW_KIND_CONFLICT", {m.id for m in pg})
    promote_said = find("REVIEW_KIND_PROMOTION", {said.id})
    promote_guessed = find("REVIEW_KIND_PROMOTION", {guessed.id})
    assert "never becomes" in items[promote_guessed]["blocked"]
    # b's memories are not a's to review.
    assert not [
        i for i in items.values() if {m["id"] for m in i["memories"]} & {m.id for m in carol}
    ]
    for item_id in (dup_henry, dup_hiking, conflict, promote_said):
        assert f"### {item_id} " in note  # a section per item, by its stable id

    # A note edited by hand applies nothing: tick every box and claim approval.
    bundles[0].write_text(
        note.replace("decision: **pending**", "decision: **approved (item)** [x]")
    )
    before = state(client, a)
    code, out = run(capsys, *base, "review", "apply", bundle)
    assert code == 0 and "nothing approved" in out
    assert state(client, a) == before

    # Partial approval: two duplicates and both promotions, each by itself; the conflict waits.
    code, out = run(
        capsys,
        *base,
        "review",
        "approve",
        bundle,
        "--items",
        f"{dup_henry},{dup_hiking}",
        promote_said,
        promote_guessed,
    )
    assert code == 0, out
    # One memory changes between prepare and apply.
    client.update(a, hiking[0].id, text="The user enjoys hiking in the Dolomites")
    before = state(client, a)
    code, out = run(capsys, *base, "review", "apply", bundle)
    assert code == 1, out  # a conflict and a refusal are reported
    assert "applied 2, already applied 0, conflicts 1, refused 1" in out
    after = state(client, a)

    forgotten = json.loads(run(capsys, *base, "review", "show", bundle, "--json")[1])
    outcomes = {k: v["outcome"] for k, v in forgotten["decisions"].items() if v["outcome"]}
    assert outcomes == {
        dup_henry: "APPLY_OUTCOME_APPLIED",
        promote_said: "APPLY_OUTCOME_APPLIED",
        dup_hiking: "APPLY_OUTCOME_CONFLICT",
        promote_guessed: "APPLY_OUTCOME_REFUSED",
    }
    dropped = items[dup_henry]["action"]["memoryId"]
    moved = [i for i, m in after.items() if m["meta"].get("promoted_from") == said.id]
    assert len(moved) == 1 and after[moved[0]]["scope"] == TEAM
    # Exactly those changes: one duplicate gone, one memory moved; everything else as it was.
    assert set(before) - set(after) == {dropped, said.id}
    assert set(after) - set(before) == set(moved)
    for memory_id in set(before) & set(after):
        assert after[memory_id] == before[memory_id]
    assert after[guessed.id]["scope"] == f"agent:{a}"
    assert not after[pg[0].id]["superseded_by"] and not after[pg[1].id]["superseded_by"]
    assert set(state(client, b)) >= {m.id for m in carol}  # b's twins untouched
    # b reads the workspace: the promoted memory is now shared.
    assert moved[0] in state(client, b)

    # A second apply changes nothing and says so.
    code, out = run(capsys, *base, "review", "apply", bundle)
    assert "applied 0, already applied 2, conflicts 1, refused 1" in out
    assert state(client, a) == after

    # The conflict, approved now, supersedes the older decision.
    run(capsys, *base, "review", "approve", bundle, "--items", conflict)
    code, out = run(capsys, *base, "review", "apply", bundle)
    assert "applied 1, already applied 2" in out
    older = items[conflict]["action"]["memoryId"]
    assert client.get(a, older).superseded_by == items[conflict]["action"]["keepId"]


def test_bulk_approval_never_moves_a_private_memory_to_a_shared_scope(
    client: MemoryClient, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = "rev-bulk"
    said = client.store(
        a, "The office closes at six on Fridays", metadata={"asserted_by": "user"}
    ).memory
    base = ["--vault", str(tmp_path), "--agent", a, "--address", address]
    assert run(capsys, *base, "review", "prepare", "--promote", f"{said.id}={TEAM}")[0] == 0
    bundle = next((tmp_path / "00-system/memoryd/review-bundles").glob("rb-*.md")).stem
    assert run(capsys, *base, "review", "approve", bundle, "--items", "all")[0] == 0
    code, out = run(capsys, *base, "review", "apply", bundle)
    assert code == 1 and "refused 1" in out and "approved by itself" in out
    assert client.get(a, said.id).scope == f"agent:{a}"


def test_a_deleted_vault_changes_nothing_in_memory_and_doctor_says_why(
    client: MemoryClient, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = "rev-gone"
    client.store(a, HENRY[0])
    client.store(a, HENRY[1])
    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    base = ["--vault", str(vault_dir), "--agent", a, "--address", address]
    assert run(capsys, *base, "build")[0] == 0
    assert run(capsys, *base, "review", "prepare")[0] == 0
    bundle = next((vault_dir / "00-system/memoryd/review-bundles").glob("rb-*.md")).stem
    assert run(capsys, *base, "review", "approve", bundle, "--items", "all")[0] == 0
    before = state(client, a)
    shutil.rmtree(vault_dir)  # deleted mid-run
    code, out = run(capsys, *base, "review", "apply", bundle)
    assert code == 4, out
    code, out = run(capsys, *base, "build")
    assert code == 4 and "cannot be used" in out
    code, out = run(capsys, *base, "doctor")
    assert code == 1 and "FAIL vault" in out and "ok   daemon" in out
    assert state(client, a) == before
    assert not vault_dir.exists()
    # Store, Recall and Forget go on as before.
    r = client.store(a, "The vault is gone but memory works")
    assert [h.memory.id for h in client.recall(a, "is memory still working", limit=1).results] == [
        r.memory.id
    ]
    assert list(client.forget(a, id=r.memory.id).deleted_ids) == [r.memory.id]


def test_the_dashboards_of_a_seeded_store_match_stats(
    client: MemoryClient, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, other = "dash-a", "dash-b"
    seeded = [
        (a, "The user prefers green tea in the afternoon", pb.CATEGORY_PREFERENCE, ""),
        (a, "Our API gateway is Envoy", pb.CATEGORY_FACT, ""),
        (a, "The data team chose dbt for transformations", pb.CATEGORY_DECISION, ""),
        (a, "Mia is the product manager for search", pb.CATEGORY_ENTITY, ""),
        (a, "The quarterly offsite is in Lisbon", pb.CATEGORY_FACT, TEAM),
        (other, "Release notes are written by the on-call engineer", pb.CATEGORY_FACT, TEAM),
        (other, "The user's cat is named Pixel", pb.CATEGORY_ENTITY, ""),  # private to other
    ]
    for agent, text, category, scope in seeded:
        client.store(agent, text, category=category, scope=scope)
    client.recall(a, "who is the product manager for search")
    code, out = run(capsys, "--vault", str(tmp_path), "--agent", a, "--address", address, "build")
    assert code == 0, out
    note = (tmp_path / "00-system/memoryd/dashboards/overview.md").read_text()
    front = dict(line.split(": ", 1) for line in note.split("---\n")[1].splitlines())
    stats = client.stats(a)
    assert json.loads(front["total"]) == stats.total
    assert json.loads(front["byScope"]) == dict(stats.by_scope)
    assert {f"CATEGORY_{k.upper()}": v for k, v in json.loads(front["byCategory"]).items()} == dict(
        stats.by_category
    )
    by_agent = json.loads(front["byAgent"])
    assert (
        by_agent[a] == 5 and by_agent[other] >= 1
    )  # other's workspace memory, never its private one
    assert "Pixel" not in note
    assert f"{stats.total} memories readable by `{a}` (daemon Stats: {stats.total};" in note
    records = sorted(p.name for p in (tmp_path / "00-system/memoryd/records").iterdir())
    assert f"{a}--entity.md" in records and f"{other}--entity.md" not in records
    # Rebuilding keeps what a person wrote under the block.
    with (tmp_path / "00-system/memoryd/dashboards/overview.md").open("a") as f:
        f.write("\nMy own remark.\n")
    assert (
        run(capsys, "--vault", str(tmp_path), "--agent", a, "--address", address, "build")[0] == 0
    )
    assert (
        (tmp_path / "00-system/memoryd/dashboards/overview.md")
        .read_text()
        .endswith("My own remark.\n")
    )


def test_the_morning_review_prepares_a_bundle_and_never_applies(
    client: MemoryClient, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = "rev-morning"
    for t in CAROL:
        client.store(a, t)
    before = state(client, a)
    base = ["--vault", str(tmp_path), "--agent", a, "--address", address]
    code, out = run(capsys, *base, "morning-review")
    assert code == 0 and "nothing applied" in out, out
    (note,) = (tmp_path / "00-system/memoryd/review-bundles").glob("rb-*.md")
    text = note.read_text()
    assert 'trigger: "morning-review"' in text and 'status: "pending_user_review"' in text
    assert "### rv-" in text
    assert state(client, a) == before
    # Scheduling is off by default and says how to turn it on.
    code, out = run(capsys, *base, "morning-review", "--schedule")
    assert code == 2 and "morning_review] enabled = true" in out


def test_the_async_client_prepares_and_applies(client: MemoryClient, address: str) -> None:
    import asyncio

    from memoryd_client import AsyncMemoryClient, review_pb

    a = "rev-async"
    twins = [client.store(a, t).memory for t in HIKING]

    async def go() -> tuple[review_pb.PrepareReviewResponse, review_pb.ApplyReviewResponse]:
        async with AsyncMemoryClient(address, timeout=30.0) as c:
            prepared = await c.review_prepare(
                review_pb.PrepareReviewRequest(
                    agent_id=a, kinds=[review_pb.REVIEW_KIND_DUPLICATE], scopes=[f"agent:{a}"]
                )
            )
            (item,) = prepared.items
            approved = approved_item(item)
            applied = await c.review_apply(
                review_pb.ApplyReviewRequest(agent_id=a, items=[approved])
            )
            return prepared, applied

    prepared, applied = asyncio.run(go())
    assert {m.id for m in prepared.items[0].memories} == {m.id for m in twins}
    assert applied.applied == 1 and applied.results[0].outcome == review_pb.APPLY_OUTCOME_APPLIED
    assert len(client.list_all(a, scopes=[f"agent:{a}"])) == 1


def test_conflicts_and_duplicates_listings(
    client: MemoryClient, address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = "rev-list"
    twins = [client.store(a, t).memory for t in CAROL]
    pg = [client.store(a, t, category=pb.CATEGORY_DECISION).memory for t in POSTGRES]
    base = ["--vault", str(tmp_path), "--agent", a, "--address", address]
    before = state(client, a)
    code, out = run(capsys, *base, "duplicates")
    assert code == 0 and "1 duplicate candidates" in out, out
    (dup_note,) = (tmp_path / "00-system/memoryd/duplicate-candidates").glob(f"*-{a}.md")
    assert all(m.id in dup_note.read_text() for m in twins)
    code, out = run(capsys, *base, "conflicts")
    assert code == 0 and "1 conflicts" in out and "negation" in out, out
    (conflict_note,) = (tmp_path / "00-system/memoryd/conflicts").glob(f"*-{a}.md")
    assert all(m.id in conflict_note.read_text() for m in pg)
    assert state(client, a) == before  # listings change nothing
