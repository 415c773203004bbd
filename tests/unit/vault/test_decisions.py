"""Decisions are commands, kept in the bundle's state file: approve by id (ITEM) or in bulk
(all / low-risk: BULK), reject, snooze; apply sends only what is approved, as prepared."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import pytest
from memoryd_client import review_pb
from memoryd_client.vault import cli
from memoryd_client.vault.state import shown_hash

IDS = [
    "11111111-1111-4111-8111-111111111111",
    "22222222-2222-4222-8222-222222222222",
    "33333333-3333-4333-8333-333333333333",
]


BUNDLE = "rb-20261130-090000-ab12"


def memory(n: int) -> review_pb.ReviewMemory:
    """Memory n as the daemon shows it, with the hash of what it shows."""
    m = review_pb.ReviewMemory(id=IDS[n], agent_id="main", scope="agent:main", text=f"memory {n}")
    m.hash = shown_hash(m)
    return m


def item(n: int, risk: int) -> review_pb.ReviewItem:
    return review_pb.ReviewItem(
        item_id=f"rv-{n:016x}",
        kind=review_pb.REVIEW_KIND_STALE,
        risk=risk,  # type: ignore[arg-type]
        memories=[memory(n)],
        action=review_pb.ReviewAction(kind=review_pb.REVIEW_ACTION_KIND_FORGET, memory_id=IDS[n]),
        bundle_id=BUNDLE,
        signature=f"hmac-sha256:{n:064x}",
    )


class FakeClient:
    sent: ClassVar[list[review_pb.ApplyReviewRequest]] = []

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def review_prepare(
        self, req: review_pb.PrepareReviewRequest
    ) -> review_pb.PrepareReviewResponse:
        return review_pb.PrepareReviewResponse(
            items=[
                item(0, review_pb.RISK_CLASS_LOW),
                item(1, review_pb.RISK_CLASS_HIGH),
                item(2, review_pb.RISK_CLASS_MEDIUM),
            ],
            memories_scanned=3,
            bundle_id=BUNDLE,
        )

    def review_apply(self, req: review_pb.ApplyReviewRequest) -> review_pb.ApplyReviewResponse:
        FakeClient.sent.append(req)
        return review_pb.ApplyReviewResponse(
            results=[
                review_pb.ItemResult(item_id=i.item_id, outcome=review_pb.APPLY_OUTCOME_APPLIED)
                for i in req.items
            ],
            applied=len(req.items),
        )


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setattr(cli.Vault, "client", lambda self: FakeClient())
    FakeClient.sent = []

    def _run(*argv: str) -> tuple[int, str]:
        code = cli.main(["--vault", str(tmp_path), "--agent", "main", *argv])
        out = capsys.readouterr()
        return code, out.out + out.err

    return _run


def bundle_id(tmp_path: Path) -> str:
    return next((tmp_path / "00-system/memoryd/review-bundles").glob("rb-*.md")).stem


def test_apply_sends_only_approved_items_with_how_they_were_approved(
    run: Any, tmp_path: Path
) -> None:
    assert run("review", "prepare")[0] == 0
    b = bundle_id(tmp_path)
    low, high, medium = (f"rv-{n:016x}" for n in range(3))
    assert run("review", "approve", b, "--items", "low-risk")[0] == 0
    assert run("review", "approve", b, "--items", high)[0] == 0
    assert run("review", "reject", b, "--items", medium)[0] == 0
    code, out = run("review", "apply", b)
    assert code == 0, out
    (req,) = FakeClient.sent
    sent = {i.item_id: i for i in req.items}
    assert set(sent) == {low, high}
    assert sent[low].approval == review_pb.APPROVAL_LOW_RISK
    assert sent[high].approval == review_pb.APPROVAL_ITEM
    assert [(h.id, h.hash) for h in sent[high].hashes] == [(IDS[1], memory(1).hash)]
    assert req.agent_id == "main"
    state = json.loads((tmp_path / f"00-system/memoryd/review-bundles/{b}.state.json").read_text())
    assert state["status"] == "applied"


def test_snoozed_items_wait_and_an_ended_snooze_needs_a_new_decision(
    run: Any, tmp_path: Path
) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    assert run("review", "approve", b, "--items", "all")[0] == 0
    assert run("review", "snooze", b, "--items", "rv-0000000000000000", "--until", "3d")[0] == 0
    assert (
        run("review", "snooze", b, "--items", "rv-0000000000000001", "--until", "2000-01-01")[0]
        == 0
    )
    run("review", "apply", b)
    (req,) = FakeClient.sent
    assert [i.item_id for i in req.items] == ["rv-0000000000000002"]


def test_a_hand_edited_note_or_unknown_ids_apply_nothing(run: Any, tmp_path: Path) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    note = tmp_path / f"00-system/memoryd/review-bundles/{b}.md"
    note.write_text(
        note.read_text().replace("**pending**", "**approved (item)**") + "\n- [x] approve all\n"
    )
    code, out = run("review", "apply", b)
    assert code == 0 and "nothing approved" in out and FakeClient.sent == []
    code, out = run("review", "approve", b, "--items", "rv-ffffffffffffffff")
    assert code == 2 and "no item" in out
    code, out = run("review", "approve", "../../etc/passwd", "--items", "all")
    assert code == 2 and "not a bundle id" in out
    # "$" would match before a final newline: a different file name, a line break in notes
    code, out = run("review", "approve", b + "\n", "--items", "all")
    assert code == 2 and "not a bundle id" in out


def state_file(tmp_path: Path, b: str) -> Path:
    return tmp_path / f"00-system/memoryd/review-bundles/{b}.state.json"


def test_apply_sends_each_item_with_the_daemons_bundle_id_and_signature(
    run: Any, tmp_path: Path
) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    assert b == BUNDLE  # the daemon names the bundle (its id is signed into every item)
    run("review", "approve", b, "--items", "all")
    run("review", "apply", b)
    (req,) = FakeClient.sent
    assert {(i.bundle_id, i.signature) for i in req.items} == {
        (BUNDLE, f"hmac-sha256:{n:064x}") for n in range(3)
    }


def test_a_forged_or_edited_decision_in_the_state_file_is_never_sent(
    run: Any, tmp_path: Path
) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    low, high, medium = (f"rv-{n:016x}" for n in range(3))
    assert run("review", "approve", b, "--items", "low-risk")[0] == 0
    path = state_file(tmp_path, b)
    raw = json.loads(path.read_text())
    # Someone who can write the vault: the low-risk bulk approval becomes an item approval,
    # the high-risk item is marked approved with the seal copied from another decision.
    raw["decisions"][low]["approval"] = "item"
    raw["decisions"][high] = dict(raw["decisions"][low], approval="bulk")
    raw["decisions"][medium] = {"status": "approved", "approval": "item"}
    path.write_text(json.dumps(raw))
    code, out = run("review", "apply", b)
    assert code == 1 and FakeClient.sent == []
    assert out.count("not sent") == 3 and "edited" in out
    # Decided again by the command, it is sent.
    assert run("review", "approve", b, "--items", high)[0] == 0
    assert run("review", "apply", b)[0] == 1  # the other two are still not sent
    (req,) = FakeClient.sent
    assert [(i.item_id, i.approval) for i in req.items] == [(high, review_pb.APPROVAL_ITEM)]


def test_the_approval_key_must_live_outside_the_vault(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    monkeypatch.setenv("MEMORYD_VAULT__APPROVAL_KEY_FILE", str(tmp_path / "approval.key"))
    code, out = run("review", "approve", b, "--items", "all")
    assert code == 2 and "inside the vault" in out
    assert not (tmp_path / "approval.key").exists()


def test_an_approval_key_behind_a_symlink_or_of_another_user_is_refused(
    run: Any, tmp_path: Path, private_config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    elsewhere = private_config_home / "elsewhere.key"
    elsewhere.write_text("ab" * 32 + "\n")
    elsewhere.chmod(0o600)
    key = private_config_home / "memoryd" / "vault-approval.key"
    key.parent.mkdir()
    key.symlink_to(elsewhere)  # whoever planted the link could know or change the key
    code, out = run("review", "approve", b, "--items", "all")
    assert code == 2 and "is a symbolic link" in out
    key.unlink()
    assert run("review", "approve", b, "--items", "all")[0] == 0  # made there, 0600
    monkeypatch.setattr(os, "geteuid", lambda: key.stat().st_uid + 1)
    code, out = run("review", "apply", b)
    assert code == 2 and "belongs to another user" in out and FakeClient.sent == []


def test_the_bundle_is_partially_applied_while_items_are_still_pending(
    run: Any, tmp_path: Path
) -> None:
    run("review", "prepare")
    b = bundle_id(tmp_path)
    low, high, medium = (f"rv-{n:016x}" for n in range(3))
    run("review", "approve", b, "--items", low)
    code, out = run("review", "apply", b)
    assert code == 0 and "bundle partially_applied" in out
    assert json.loads(state_file(tmp_path, b).read_text())["status"] == "partially_applied"
    front = (tmp_path / f"00-system/memoryd/review-bundles/{b}.md").read_text()
    assert 'status: "partially_applied"' in front
    run("review", "reject", b, "--items", medium)
    run("review", "approve", b, "--items", high)
    run("review", "apply", b)
    assert json.loads(state_file(tmp_path, b).read_text())["status"] == "applied"


def test_a_snooze_date_without_a_zone_is_in_the_configured_timezone(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYD_VAULT__TIMEZONE", "Europe/Zurich")
    run("review", "prepare")
    b = bundle_id(tmp_path)
    low, high, _ = (f"rv-{n:016x}" for n in range(3))
    assert run("review", "snooze", b, "--items", low, "--until", "2999-12-01T09:00")[0] == 0
    assert run("review", "snooze", b, "--items", high, "--until", "2000-01-01")[0] == 0
    decisions = json.loads(state_file(tmp_path, b).read_text())["decisions"]
    assert decisions[low]["until"] == "2999-12-01T09:00:00+01:00"
    code, out = run("review", "apply", b)
    assert code == 0 and "nothing approved" in out  # no crash comparing the times
    code, out = run("review", "snooze", b, "--items", low, "--until", "next tuesday")
    assert code == 2 and out.count("\n") == 1 and "Europe/Zurich" in out
    monkeypatch.setenv("MEMORYD_VAULT__TIMEZONE", "Mars/Olympus")
    code, out = run("review", "snooze", b, "--items", low, "--until", "2999-12-01")
    assert code == 2 and "not a known time zone" in out


def test_prepare_and_bulk_approval_say_what_will_not_apply(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked, solo = item(0, review_pb.RISK_CLASS_HIGH), item(1, review_pb.RISK_CLASS_HIGH)
    blocked.blocked = "agent 'main' may not write workspace:team"
    solo.needs_item_approval = True
    response = review_pb.PrepareReviewResponse(items=[blocked, solo], bundle_id=BUNDLE)
    monkeypatch.setattr(FakeClient, "review_prepare", lambda self, req: response)
    code, out = run("review", "prepare")
    assert code == 0
    assert "(will be refused: agent 'main' may not write workspace:team)" in out
    assert f"(needs approving by itself: --items {solo.item_id})" in out
    code, out = run("review", "approve", BUNDLE, "--items", "all")
    assert code == 0 and f"approved by themselves: --items {solo.item_id}" in out
