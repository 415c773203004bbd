"""``memoryd vault [--vault PATH] [--agent ID] [--review-root DIR] VERB``.

Verbs: ``doctor``, ``build``, ``review prepare|show|approve|reject|snooze|apply``,
``conflicts``, ``duplicates``. The vault path, agent and review root also come from
``[vault]`` settings (``--config`` / ``MEMORYD_CONFIG``) and ``MEMORYD_VAULT__PATH``,
``MEMORYD_VAULT__AGENT``, ``MEMORYD_VAULT__REVIEW_ROOT``; the daemon address from
``--address`` or ``MEMORYD_ADDRESS``, the key from ``MEMORYD_AUTH_TOKEN``.

Exit codes: 0 done, 1 the daemon refused (or doctor found a problem, or an apply had
conflicts or refusals), 2 bad command line or settings, 3 no daemon answers, 4 the vault
cannot be used (missing, read-only, a path outside the review root).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import grpc

from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client.client import MemoryClient, MemorydError
from memoryd_client.vault import render
from memoryd_client.vault.blocks import update_note
from memoryd_client.vault.paths import ReviewRoot, VaultPathError
from memoryd_client.vault.schedule import Cron, CronError
from memoryd_client.vault.settings import VaultConfigError, VaultSettings, load
from memoryd_client.vault.state import (
    BundleState,
    Decision,
    StateError,
    approval_key,
    approved_item,
    check_bundle_id,
    note_path,
    now_iso,
    seal,
    sealed,
    state_path,
    unmatched_memories,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_VAULT = 0, 1, 2, 3, 4
LOG = "managed-blocks.log.jsonl"
KINDS = {"duplicate": 1, "conflict": 2, "stale": 3, "promotion": 4}


class VaultError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


# -- context ---------------------------------------------------------------------------


class Vault:
    def __init__(self, args: argparse.Namespace, settings: VaultSettings):
        path = args.vault or settings.path
        if not path:
            raise VaultError(
                "no vault: pass --vault PATH or set [vault] path (MEMORYD_VAULT__PATH); "
                "the vault is off by default",
                EXIT_USAGE,
            )
        if not args.vault and not settings.enabled:
            raise VaultError(
                "the vault is off: set [vault] enabled = true (MEMORYD_VAULT__ENABLED=true) "
                "or pass --vault PATH",
                EXIT_USAGE,
            )
        self.agent = args.agent or settings.agent
        if not self.agent:
            raise VaultError("no agent: pass --agent ID or set [vault] agent", EXIT_USAGE)
        self.settings = settings
        try:
            self.root = ReviewRoot(
                Path(path).expanduser(),
                args.review_root or settings.review_root,
                allow_dot_obsidian=settings.allow_dot_obsidian_write,
            )
        except VaultPathError as e:
            raise VaultError(str(e), EXIT_VAULT) from None
        self.address = args.address or os.environ.get("MEMORYD_ADDRESS") or "127.0.0.1:50051"
        self.token = os.environ.get("MEMORYD_AUTH_TOKEN") or None

    def approval_key(self) -> bytes:
        configured = self.settings.approval_key_file
        if configured:
            path = Path(configured).expanduser()
        else:
            base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
            path = Path(base) / "memoryd" / "vault-approval.key"
        return approval_key(path, self.root.vault)

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.settings.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise VaultError(
                f"[vault] timezone {self.settings.timezone!r} is not a known time zone "
                "(e.g. UTC, Europe/Zurich)",
                EXIT_USAGE,
            ) from None

    def client(self) -> MemoryClient:
        return MemoryClient(self.address, token=self.token, timeout=60.0)

    def write_note(self, rel: str, front: dict[str, Any], body: str, block_id: str = "body") -> str:
        """Write memoryd's front matter and managed block of note ``rel``; a person's text
        around the block is kept; a block a person edited is left and the new version goes
        to proposals/. Returns what happened to the block."""
        existing = self.root.read(rel)
        upd = update_note(render.split_front_matter(existing), block_id, body)
        self.root.write(rel, render.merge_front_matter(existing, front) + upd.text)
        entry: dict[str, Any] = {
            "at": now_iso(),
            "note": rel,
            "block": block_id,
            "action": upd.action,
        }
        if upd.action == "edited_by_person":
            proposal = (
                "proposals/" + rel.replace("/", "__").removesuffix(".md") + f"--{block_id}.md"
            )
            self.root.write(
                proposal,
                render.front_matter(
                    {
                        "type": "memoryd-block-proposal",
                        "note": rel,
                        "block": block_id,
                        "created": now_iso(),
                    }
                )
                + body,
            )
            entry["proposal"] = proposal
            print(f"{rel}: block {block_id!r} was edited by a person; new version in {proposal}")
        self.root.append(LOG, json.dumps(entry))
        return upd.action

    def load_state(self, bundle_id: str) -> BundleState:
        check_bundle_id(bundle_id)
        text = self.root.read(state_path(bundle_id))
        if text is None:
            raise VaultError(f"no bundle {bundle_id} under {self.root.root}", EXIT_VAULT)
        state = BundleState.from_json(text)
        if state.agent != self.agent:
            raise VaultError(
                f"bundle {bundle_id} was prepared for agent {state.agent!r}, not {self.agent!r}",
                EXIT_USAGE,
            )
        return state

    def save_state(self, state: BundleState) -> None:
        self.root.write(state_path(state.bundle_id), state.to_json())
        self.write_note(
            note_path(state.bundle_id), render.bundle_front(state), render.bundle_body(state)
        )


# -- verbs -----------------------------------------------------------------------------


def doctor(v: Vault, args: argparse.Namespace) -> int:
    problems: list[str] = []
    lines: list[str] = []
    try:
        real = v.root.check_vault()
        lines.append(f"ok   vault {real}")
    except OSError as e:
        problems.append(f"vault {v.root.vault} cannot be used: {e.strerror or e}")
        real = None
    if real is not None:
        try:
            root = v.root.real_root()
            lines.append(f"ok   review root {root}")
            probe = ".doctor-probe"
            v.root.write(probe, "ok\n")
            v.root.remove(probe)
            lines.append("ok   review root is writable")
        except VaultPathError as e:
            problems.append(str(e))
        except OSError as e:
            problems.append(f"review root cannot be written: {e.strerror or e}")
        if (real / ".obsidian").is_dir():
            lines.append(
                "ok   an Obsidian vault (.obsidian/ is never written)"
                if not v.settings.allow_dot_obsidian_write
                else "note .obsidian/ may be written (vault.allow_dot_obsidian_write)"
            )
        else:
            lines.append("ok   plain Markdown (no .obsidian/: Obsidian is optional)")
    _doctor_schedule(v.settings, lines, problems)
    try:
        with v.client() as c:
            stats = c.stats(v.agent)
        lines.append(f"ok   daemon {v.address}: {stats.total} memories readable by {v.agent}")
    except MemorydError as e:
        problems.append(f"daemon {v.address}: {e.code.name} {e.message}")
    for line in lines:
        print(line)
    for p in problems:
        print(f"FAIL {p}")
    if not problems or real is not None:
        body = "# memoryd vault doctor\n\n" + "\n".join(
            [f"- {line}" for line in lines] + [f"- **FAIL** {p}" for p in problems]
        )
        with contextlib.suppress(OSError, VaultPathError):  # already reported above
            v.write_note(
                "doctor/doctor.md",
                {"type": "memoryd-doctor", "checked": now_iso(), "problems": len(problems)},
                body,
            )
    return EXIT_FAILED if problems else EXIT_OK


def _doctor_schedule(s: VaultSettings, lines: list[str], problems: list[str]) -> None:
    """The morning review's cron and time zone, and [vault] timezone."""
    try:
        ZoneInfo(s.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"[vault] timezone {s.timezone!r} is not a known time zone")
    try:
        cron = Cron.parse(s.morning_cron, s.morning_timezone)
    except CronError as e:
        if s.morning_enabled:
            problems.append(f"[vault.morning_review] cannot run: {e}")
        else:
            lines.append(f"note the morning review is off; its settings would not run: {e}")
        return
    if s.morning_enabled:
        at = cron.next_after(datetime.now(UTC)).astimezone(cron.zone)
        lines.append(
            f"ok   morning review {s.morning_cron!r} in {s.morning_timezone}: next at "
            f"{at.isoformat()} (run `memoryd vault morning-review --schedule`)"
        )
    else:
        lines.append("ok   morning review off ([vault.morning_review] enabled = false)")


def build(v: Vault, args: argparse.Namespace) -> int:
    with v.client() as c:
        stats = c.stats(v.agent)
        memories = c.list_all(v.agent)
    now = datetime.now(UTC)
    built = now_iso()
    numbers = render.dashboard_numbers(memories, now)
    v.write_note("README.md", {"type": "memoryd-readme"}, render.README_BODY, "readme")
    v.write_note(
        "dashboards/overview.md",
        render.dashboard_front(v.agent, numbers, built),
        render.dashboard_body(v.agent, numbers, stats),
    )
    written = 2
    if v.settings.records and not args.no_records:
        for rel, (front, body) in render.records_notes(v.agent, memories, built).items():
            v.write_note(rel, front, body)
            written += 1
    print(f"built {written} notes under {v.root.root} ({numbers['total']} memories)")
    return EXIT_OK


def _prepare(
    v: Vault, kinds: Sequence[int], promotions: Sequence[str] = ()
) -> review_pb.PrepareReviewResponse:
    asks = []
    for p in promotions:
        memory_id, sep, scope = p.partition("=")
        if not sep or not memory_id or not scope:
            raise VaultError(f"--promote {p!r}: use MEMORY_ID=TARGET_SCOPE", EXIT_USAGE)
        asks.append(review_pb.PromotionAsk(memory_id=memory_id, target_scope=scope))
    req = review_pb.PrepareReviewRequest(agent_id=v.agent, kinds=list(kinds), promotions=asks)  # type: ignore[arg-type]
    with v.client() as c:
        return c.review_prepare(req)


def review_prepare(v: Vault, args: argparse.Namespace) -> int:
    kinds = [KINDS[k] for k in (args.kinds or [])]
    if args.promote and kinds and KINDS["promotion"] not in kinds:
        kinds.append(KINDS["promotion"])
    resp = _prepare(v, kinds, args.promote or ())
    state = new_bundle(v, resp)
    print(
        f"bundle {state.bundle_id}: {len(state.items)} proposals -> "
        f"{v.root.root / note_path(state.bundle_id)}"
    )
    for item in state.items:
        print(
            f"  {item.item_id}  {render.KIND.get(item.kind, '?'):9} "
            f"{render.RISK.get(item.risk, '?'):6} "
            f"{render.action_words(item)}{_caveat(item)}"
        )
    return EXIT_OK


def _caveat(item: review_pb.ReviewItem) -> str:
    """What a person must know before approving an item, on its line."""
    if item.blocked:
        return f" (will be refused: {item.blocked})"
    if item.needs_item_approval:
        return " (needs approving by itself: --items " + item.item_id + ")"
    return ""


def new_bundle(
    v: Vault, resp: review_pb.PrepareReviewResponse, trigger: str = "manual"
) -> BundleState:
    if not resp.bundle_id or any(not i.signature for i in resp.items):
        raise VaultError(
            "the daemon does not sign review items (it is older than this CLI): upgrade memoryd",
            EXIT_FAILED,
        )
    if unmatched := unmatched_memories(resp.items):
        item_id, memory_id = unmatched[0]
        raise VaultError(
            f"the daemon's item {item_id} shows memory {memory_id} with fields its hash does "
            "not cover (the daemon is older than this CLI?): upgrade memoryd",
            EXIT_FAILED,
        )
    state = BundleState(
        bundle_id=check_bundle_id(resp.bundle_id),
        agent=v.agent,
        created=now_iso(),
        items=list(resp.items),
        decisions={i.item_id: Decision() for i in resp.items},
        truncated=resp.truncated,
        memories_scanned=resp.memories_scanned,
        trigger=trigger,
    )
    v.save_state(state)
    return state


def review_show(v: Vault, args: argparse.Namespace) -> int:
    state = v.load_state(args.bundle)
    if args.json:
        print(state.to_json())
        return EXIT_OK
    print(
        f"bundle {state.bundle_id} ({state.status}), agent {state.agent}, created {state.created}"
    )
    for item in state.items:
        print(
            f"  {item.item_id}  {render.KIND.get(item.kind, '?'):9} "
            f"{render.RISK.get(item.risk, '?'):6} "
            f"{render.decision_words(state, item.item_id):24} {render.action_words(item)}"
            f"{_caveat(item)}"
        )
    return EXIT_OK


def _chosen(state: BundleState, spec: Sequence[str], allow_low_risk: bool) -> tuple[list[str], str]:
    """The item ids ``--items`` names, and how: "item" (by id), "bulk" (all) or
    "low-risk". The risk read here is the state file's, which a vault writer could relabel:
    a low-risk approval is sent as APPROVAL_LOW_RISK, and the daemon applies it only to an
    item it classed low risk itself."""
    words = [w for s in spec for w in re.split(r"[,\s]+", s) if w]
    if words == ["all"]:
        return [i.item_id for i in state.items], "bulk"
    if words == ["low-risk"]:
        if not allow_low_risk:
            raise VaultError("low-risk is only for approve", EXIT_USAGE)
        low = [i.item_id for i in state.items if i.risk == review_pb.RISK_CLASS_LOW]
        return low, "low-risk"
    if {"all", "low-risk"} & set(words):
        raise VaultError("--items takes ids, or all, or low-risk alone", EXIT_USAGE)
    for w in words:
        state.item(w)  # raises for an unknown id
    return words, "item"


APPROVALS = {
    "item": review_pb.APPROVAL_ITEM,
    "bulk": review_pb.APPROVAL_BULK,
    "low-risk": review_pb.APPROVAL_LOW_RISK,
}


def review_decide(v: Vault, args: argparse.Namespace) -> int:
    state = v.load_state(args.bundle)
    ids, how = _chosen(state, args.items, allow_low_risk=args.decision == "approved")
    until = ""
    if args.decision == "snoozed":
        until = _until(args.until, v.zone())
    key = v.approval_key()
    for item_id in ids:
        d = Decision(
            status=args.decision,
            approval=how if args.decision == "approved" else "",
            until=until,
            at=now_iso(),
        )
        d.seal = seal(key, state, state.item(item_id), d)
        state.decisions[item_id] = d
    v.save_state(state)
    print(f"{args.decision} {len(ids)} item(s) of {state.bundle_id}")
    if how != "item" and args.decision == "approved":
        solo = [i for i in ids if state.item(i).needs_item_approval]
        if solo:
            print(
                f"note: {len(solo)} of them move a memory to a shared scope and apply only when "
                f"approved by themselves: --items {' '.join(solo)}"
            )
    return EXIT_OK


def _until(value: str, zone: ZoneInfo) -> str:
    """An ISO time with its offset; a date or time given without a zone is in ``zone``
    ([vault] timezone)."""
    m = re.fullmatch(r"(\d+)([hdw])", value)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        delta = {"h": timedelta(hours=n), "d": timedelta(days=n), "w": timedelta(weeks=n)}[unit]
        return (datetime.now(UTC) + delta).replace(microsecond=0).isoformat()
    when = parse_time(value, zone)
    if when is None:
        raise VaultError(
            f"--until {value!r}: use a date (2026-12-01), a time (2026-12-01T09:00, in "
            f"{zone.key} unless it names its offset) or 3d / 12h / 2w",
            EXIT_USAGE,
        )
    return when.isoformat()


def parse_time(value: str, zone: ZoneInfo) -> datetime | None:
    """An aware time (naive ones in ``zone``), or None when ``value`` is not one."""
    try:
        when = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=zone)


def review_apply(v: Vault, args: argparse.Namespace) -> int:
    state = v.load_state(args.bundle)
    now = datetime.now(UTC)
    key = v.approval_key()
    zone = v.zone()
    items = []
    unsealed = []
    for item in state.items:
        d = state.decisions.get(item.item_id, Decision())
        if d.status == "pending":
            continue
        if not sealed(key, state, item, d):
            # Not made by review approve/reject/snooze with this key: the state file was
            # edited (or the key changed). Nothing is applied on its word.
            unsealed.append(item.item_id)
            continue
        until = parse_time(d.until, zone) if d.status == "snoozed" and d.until else None
        if until is not None and until <= now:
            d.status = "pending"  # the snooze ran out: it needs a decision again
        if d.status != "approved":
            continue
        items.append(approved_item(item, APPROVALS.get(d.approval, review_pb.APPROVAL_BULK)))
    for item_id in unsealed:
        print(
            f"  {item_id}  not sent: its decision was not made by `memoryd vault review "
            "approve|reject|snooze` with this machine's approval key (was the state file "
            "edited?); decide it again"
        )
    if not items:
        if unsealed:
            print(f"nothing sent from {state.bundle_id}")
            return EXIT_FAILED
        print(f"nothing approved in {state.bundle_id}: approve items first")
        return EXIT_OK
    with v.client() as c:
        resp = c.review_apply(review_pb.ApplyReviewRequest(agent_id=v.agent, items=items))
    for r in resp.results:
        d = state.decisions[r.item_id]
        d.outcome = review_pb.ApplyOutcome.Name(r.outcome)
        d.message = r.message
        print(f"  {r.item_id}  {d.outcome.removeprefix('APPLY_OUTCOME_').lower():16} {r.message}")
    state.applies = [
        *(state.applies or []),
        {
            "at": now_iso(),
            "applied": resp.applied,
            "already_applied": resp.already_applied,
            "conflicts": resp.conflicts,
            "refused": resp.refused,
        },
    ]
    state.settle_status()
    v.save_state(state)
    print(
        f"applied {resp.applied}, already applied {resp.already_applied}, "
        f"conflicts {resp.conflicts}, refused {resp.refused}; bundle {state.status}"
    )
    return EXIT_FAILED if resp.conflicts or resp.refused or unsealed else EXIT_OK


def _morning_once(v: Vault) -> None:
    resp = _prepare(v, [])
    state = new_bundle(v, resp, trigger="morning-review")
    risks = Counter(render.RISK.get(i.risk, "?") for i in state.items)
    print(
        f"morning review {state.bundle_id}: {len(state.items)} proposals "
        f"({risks.get('high', 0)} high, {risks.get('medium', 0)} medium, "
        f"{risks.get('low', 0)} low risk); nothing applied. Approve with "
        f"`memoryd vault review approve {state.bundle_id} --items ...`",
        flush=True,
    )


def morning_review(v: Vault, args: argparse.Namespace) -> int:
    """Proposal-only: prepares a bundle and never applies. With --schedule, at the times of
    [vault.morning_review] cron in its timezone (it must be enabled), until stopped."""
    if not args.schedule:
        _morning_once(v)
        return EXIT_OK
    s = v.settings
    if not s.morning_enabled:
        raise VaultError(
            "the morning review is off: set [vault.morning_review] enabled = true "
            "(MEMORYD_VAULT__MORNING_REVIEW__ENABLED=true)",
            EXIT_USAGE,
        )
    try:
        cron = Cron.parse(s.morning_cron, s.morning_timezone)
    except CronError as e:
        raise VaultError(f"[vault.morning_review]: {e}", EXIT_USAGE) from None
    runs = 0
    while args.runs == 0 or runs < args.runs:
        at = cron.next_after(datetime.now(UTC))
        print(f"next morning review at {at.astimezone(cron.zone).isoformat()}", flush=True)
        while (left := (at - datetime.now(UTC)).total_seconds()) > 0:
            time.sleep(min(left, 60.0))
        try:
            _morning_once(v)
        except (MemorydError, OSError, VaultPathError) as e:  # try again next time
            print(f"morning review failed: {e}", file=sys.stderr, flush=True)
        runs += 1
    return EXIT_OK


def _listing(v: Vault, kind: str, folder: str, title: str) -> int:
    resp = _prepare(v, [KINDS[kind]])
    rel = f"{folder}/{datetime.now(UTC):%Y-%m-%d}-{v.agent}.md"
    v.write_note(
        rel,
        {
            "type": f"memoryd-{folder}",
            "agent": v.agent,
            "created": now_iso(),
            "items": len(resp.items),
        },
        render.listing_body(title, resp.items, v.agent),
    )
    print(f"{len(resp.items)} {title.lower()} -> {v.root.root / rel}")
    for item in resp.items:
        print(
            f"  {item.item_id}  {render.RISK.get(item.risk, '?'):6} "
            f"{render.escape(item.reason, 120)}"
        )
    return EXIT_OK


def conflicts(v: Vault, args: argparse.Namespace) -> int:
    return _listing(v, "conflict", "conflicts", "Conflicts")


def duplicates(v: Vault, args: argparse.Namespace) -> int:
    return _listing(v, "duplicate", "duplicate-candidates", "Duplicate candidates")


# -- command line ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="memoryd vault",
        description="A Markdown/Obsidian review vault over memoryd: dashboards, records and "
        "review bundles applied only after explicit approval.",
    )
    p.add_argument("--vault", help="the vault directory ([vault] path, MEMORYD_VAULT__PATH)")
    p.add_argument("--agent", help="whose memory to review ([vault] agent, MEMORYD_VAULT__AGENT)")
    p.add_argument("--review-root", help="folder inside the vault (default 00-system/memoryd)")
    p.add_argument(
        "--address", help="daemon HOST:PORT (default MEMORYD_ADDRESS or 127.0.0.1:50051)"
    )
    p.add_argument(
        "--config", type=Path, help="TOML settings file with a [vault] table (also MEMORYD_CONFIG)"
    )
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    sub.add_parser("doctor", help="what is wrong with the vault or the daemon").set_defaults(
        func=doctor
    )
    b = sub.add_parser("build", help="dashboards, records and the README")
    b.add_argument("--no-records", action="store_true", help="dashboards only")
    b.set_defaults(func=build)
    sub.add_parser("conflicts", help="list conflict proposals").set_defaults(func=conflicts)
    sub.add_parser("duplicates", help="list near-duplicate proposals").set_defaults(func=duplicates)
    m = sub.add_parser(
        "morning-review", help="prepare a bundle now (proposals only; never applies)"
    )
    m.add_argument(
        "--schedule",
        action="store_true",
        help="run at [vault.morning_review] cron times in its timezone until stopped",
    )
    m.add_argument("--runs", type=int, default=0, help="with --schedule: stop after N runs")
    m.set_defaults(func=morning_review)
    r = sub.add_parser(
        "review", help="review bundles: prepare, show, approve, reject, snooze, apply"
    )
    rv = r.add_subparsers(dest="review_verb", required=True, metavar="VERB")
    pr = rv.add_parser("prepare", help="ask the daemon for proposals and write a bundle")
    pr.add_argument("--kinds", nargs="+", choices=sorted(KINDS), help="default: every kind")
    pr.add_argument(
        "--promote",
        action="append",
        metavar="ID=SCOPE",
        help="ask to move a memory one step up (agent -> workspace -> global)",
    )
    pr.set_defaults(func=review_prepare)
    sh = rv.add_parser("show", help="a bundle's items and decisions")
    sh.add_argument("bundle")
    sh.add_argument("--json", action="store_true", help="the bundle's whole state")
    sh.set_defaults(func=review_show)
    for verb, decision, what in (
        ("approve", "approved", "<ids|all|low-risk>"),
        ("reject", "rejected", "<ids|all>"),
        ("snooze", "snoozed", "<ids>"),
    ):
        d = rv.add_parser(verb, help=f"{verb} items of a bundle")
        d.add_argument("bundle")
        d.add_argument(
            "--items",
            nargs="+",
            required=True,
            metavar=what,
            help="item ids (comma or space separated)"
            + (
                ", all, or low-risk (bulk: never moves a memory to a shared scope)"
                if verb == "approve"
                else ""
            ),
        )
        if verb == "snooze":
            d.add_argument("--until", required=True, help="a date (2026-12-01) or 3d / 12h / 2w")
        d.set_defaults(func=review_decide, decision=decision)
    ap = rv.add_parser("apply", help="apply the approved items (re-checked by the daemon)")
    ap.add_argument("bundle")
    ap.set_defaults(func=review_apply)
    return p


# What a terminal acts on instead of showing: C0 controls but tab and newline (ESC starts
# sequences that move the cursor, erase or rewrite lines, retitle the window; CR returns to
# the line's start), DEL, C1 controls, and the bidi controls that reorder what is shown.
_TERMINAL_CONTROLS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def visible(text: str) -> str:
    """``text`` as a terminal shows it, every control character written as its escape
    (``\\x1b``, ``\\u202e``). Much of what the CLI prints comes from the bundle's state
    file, which anyone who can write the vault may edit (item ids, reasons, scopes, and the
    daemon's messages that name them): printed raw, an ESC sequence there could erase or
    rewrite the lines a person reads before approving."""
    return _TERMINAL_CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


class _Visible:
    """A text stream that writes ``visible`` text to ``out`` (stdout, stderr)."""

    def __init__(self, out: Any) -> None:
        self._out = out

    def write(self, text: str) -> int:
        self._out.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno ...
        return getattr(self._out, name)


def main(argv: Sequence[str] | None = None) -> int:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Visible(out), _Visible(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load(args.config)
        v = Vault(args, settings)
        return int(args.func(v, args))
    except VaultConfigError as e:
        print(f"memoryd vault: {e}", file=sys.stderr)
        return EXIT_USAGE
    except VaultError as e:
        print(f"memoryd vault: {e}", file=sys.stderr)
        return e.code
    except StateError as e:
        print(f"memoryd vault: {e}", file=sys.stderr)
        return EXIT_USAGE
    except VaultPathError as e:
        print(f"memoryd vault: {e}", file=sys.stderr)
        return EXIT_VAULT
    except MemorydError as e:
        if e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            address = args.address or os.environ.get("MEMORYD_ADDRESS") or "127.0.0.1:50051"
            print(
                f"memoryd vault: no daemon answers at {address} ({e.code.name}: {e.message})",
                file=sys.stderr,
            )
            return EXIT_UNREACHABLE
        print(f"memoryd vault: {e.code.name}: {e.message}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as e:
        print(f"memoryd vault: the vault cannot be used: {e}", file=sys.stderr)
        return EXIT_VAULT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
