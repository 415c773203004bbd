"""The vault's notes: Markdown with YAML front matter (queryable by Dataview or Bases).

Every note memoryd writes has memoryd's front matter, then one managed block with its
body (``blocks.py``); a person's text after the block is kept, and so are front-matter
keys a person added (:func:`merge_front_matter`). Everything a memory brings is untrusted,
its text and its metadata alike (``asserted_by`` is any agent's to set, up to 2,048
characters with line breaks): it is shown on one line with every character that can open
markup written as a character reference (``&amp;``, ``&lt;``, ``&gt;``, ``&#92;`` for a
backslash, ``&#91;``, ``&#93;``, ``&#96;``, ``&#124;``, ``&#35;``, ``&#37;``, ``&#36;``), as
are the ``:`` of ``scheme://``, the dot of ``www.`` and the ``@`` of an address
(:func:`escape`); ids, scopes and hashes go into code spans only when they are plain
identifiers (:func:`code`). A reference is never markup in CommonMark (a backslash escape
is, when the text brings its own backslash: ``\\[x](https://e)``) and holds none of the
characters Obsidian looks for in the raw text, so nothing from a memory can forge a
managed-block marker, a link, an image or embed (bracketed, wiki or a bare URL or e-mail
address a renderer would link), HTML, a heading, a #tag, a %%comment%%, $math$ or a table
cell. Control and bidi characters and tag characters (outside the flags spelled with them)
are written as escapes (``\\u202e``): a reviewer sees what would reorder or hide words.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb
from memoryd_client.untrusted import TAG_FLAG
from memoryd_client.vault.state import BundleState

KIND = {1: "duplicate", 2: "conflict", 3: "stale", 4: "promotion"}
RISK = {1: "low", 2: "medium", 3: "high"}
CATEGORY = {0: "unspecified", 1: "preference", 2: "fact", 3: "decision", 4: "entity", 5: "other"}
STALE_DAYS = 90


def escape(text: str, limit: int = 300) -> str:
    """Untrusted ``text`` for one line of a note, at most ``limit`` characters of it: it
    reads as it was and is never markup (see the module's docstring)."""
    one = " ".join(text.split())
    if len(one) > limit:
        one = one[: limit - 1] + "…"
    one = _HIDDEN.sub(lambda m: m.group(1) or m.group().encode("unicode_escape").decode(), one)
    one = one.translate(_MARKUP)
    one = _SCHEME.sub(r"\1&#58;", one)
    return _WWW.sub(r"\1&#46;", one)


# What a person reading the note would not see as it is: control characters, the bidi
# controls that reorder the words shown (a reviewer reading "Alice, not Mallory" where a
# model reads "Mallory, not Alice"), and tag characters, which show nothing yet a model may
# read as the ASCII they mirror (but in the flags of England, Scotland and Wales). Written
# as their escapes (``\u202e``, ``\U000e0069``), as the vault CLI prints them.
_HIDDEN = re.compile(
    f"({TAG_FLAG})|[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\U000e0000-\U000e007f]"
)
# Decimal references only: "&#x5b;" would hold "#x5b", a tag to Obsidian ("#91" is not).
_MARKUP = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", **{c: f"&#{ord(c)};" for c in "\\[]`|#%$@"}}
)
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?=//)")
_WWW = re.compile(r"\b(www)\.", re.IGNORECASE)
_PLAIN = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")


def code(value: str) -> str:
    """An id, scope, agent or hash in a code span when it is a plain identifier; anything
    else escaped as text: a code span shows its content raw, so a backtick in it would end
    the span and a marker in it would still be found by ``blocks.find_block``."""
    return f"`{value}`" if _PLAIN.match(value) else escape(value, 128)


def front_matter(values: Mapping[str, Any]) -> str:
    """YAML front matter; every value as JSON (valid YAML flow scalars and lists)."""
    lines = ["---"]
    for key, value in values.items():
        lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def merge_front_matter(note: str | None, values: Mapping[str, Any]) -> str:
    """memoryd's front matter for a note, keeping the keys a person added to the note's
    existing front matter (each with its lines as written) after memoryd's own."""
    kept: list[str] = []
    if note is not None and note.startswith("---\n"):
        end = note.find("\n---\n", 4)
        block = note[4:end] if end >= 0 else ""
        key = ""
        for line in block.split("\n"):
            top = re.match(r"([^\s#][^:]*):", line)
            if top:
                key = top.group(1).strip()
            if key and key not in values:
                kept.append(line)
    text = front_matter(values)
    return text[: -len("---\n")] + "".join(f"{line}\n" for line in kept) + "---\n"


def split_front_matter(note: str | None) -> str | None:
    """The note without its leading front matter (None stays None)."""
    if note is None or not note.startswith("---\n"):
        return note
    end = note.find("\n---\n", 4)
    return note if end < 0 else note[end + 5 :]


def _ts(ts: Any) -> datetime | None:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return datetime.fromtimestamp(ts.seconds + ts.nanos / 1e9, UTC)


def _day(ts: Any) -> str:
    d = _ts(ts)
    return d.strftime("%Y-%m-%d %H:%M") if d else "-"


# -- review items ----------------------------------------------------------------------


def action_words(item: review_pb.ReviewItem) -> str:
    a = item.action
    if a.kind == review_pb.REVIEW_ACTION_KIND_FORGET:
        return f"forget {code(a.memory_id)}" + (f", keep {code(a.keep_id)}" if a.keep_id else "")
    if a.kind == review_pb.REVIEW_ACTION_KIND_SUPERSEDE:
        return (
            f"{code(a.keep_id)} supersedes {code(a.memory_id)} "
            "(kept as history, no longer recalled)"
        )
    if a.kind == review_pb.REVIEW_ACTION_KIND_PROMOTE:
        return f"move {code(a.memory_id)} to {code(a.target_scope)}"
    return "?"


def item_section(item: review_pb.ReviewItem, decision: str = "") -> str:
    out = [
        f"### {escape(item.item_id, 64)} · {KIND.get(item.kind, '?')} · "
        f"risk {RISK.get(item.risk, '?')}",
        "",
    ]
    if decision:
        out.append(f"- decision: **{decision}**")
    out.append(f"- action: {action_words(item)}")
    out.append(
        f"- evidence: {escape(item.reason)}" + (f" (score {item.score:.3f})" if item.score else "")
    )
    if item.needs_item_approval:
        out.append(
            f"- needs this item approved by itself (--items {code(item.item_id)}), not in bulk"
        )
    if item.blocked:
        out.append(f"- **will be refused**: {escape(item.blocked)}")
    for m in item.memories:
        out.append(
            f"- memory {code(m.id)} ({escape(m.scope, 100)}, {CATEGORY.get(m.category, '?')}, "
            f"owner {escape(m.agent_id, 64)}, recalled {m.access_count}x, "
            f"asserted_by {escape(m.asserted_by, 64) or 'unknown'}, "
            f"hash {code(m.hash[:19])}…): {escape(m.text)}"
        )
    out.append("- preconditions: " + "; ".join(escape(p.detail) for p in item.preconditions))
    return "\n".join(out) + "\n"


def bundle_front(state: BundleState) -> dict[str, Any]:
    risks = Counter(RISK.get(i.risk, "?") for i in state.items)
    return {
        "type": "memoryd-review-bundle",
        "version": 1,
        "bundleId": state.bundle_id,
        "created": state.created,
        "createdByAgent": state.agent,
        "status": state.status,
        "applyMode": "approval_required",
        "trigger": state.trigger,
        "items": len(state.items),
        "highRisk": risks.get("high", 0),
        "mediumRisk": risks.get("medium", 0),
        "lowRisk": risks.get("low", 0),
    }


def decision_words(state: BundleState, item_id: str) -> str:
    d = state.decisions.get(item_id)
    if d is None:
        return "pending"
    words = d.status + (f" ({d.approval})" if d.approval else "")
    if d.until:
        words += f" until {d.until}"
    if d.outcome:
        words += f"; last apply: {d.outcome.removeprefix('APPLY_OUTCOME_').lower()}"
        if d.message:
            words += f" ({escape(d.message, 200)})"
    return words


def bundle_body(state: BundleState) -> str:
    b = state.bundle_id
    out = [
        f"# Review bundle {b}",
        "",
        f"Agent `{state.agent}`, prepared {state.created}: {len(state.items)} proposals "
        f"over {state.memories_scanned} memories"
        + (" (truncated)" if state.truncated else "")
        + ".",
        "",
        "Nothing here is applied by editing this note. Decide with commands:",
        "",
        f"- `memoryd vault review approve {b} --items <ids|all|low-risk>`",
        f"- `memoryd vault review reject {b} --items <ids|all>`",
        f"- `memoryd vault review snooze {b} --items <ids> --until <date|3d>`",
        f"- `memoryd vault review apply {b}` (re-checks every memory first)",
        "",
    ]
    for kind in (2, 1, 4, 3):
        items = [i for i in state.items if i.kind == kind]
        if not items:
            continue
        out.append(f"## {KIND[kind]} ({len(items)})")
        out.append("")
        for item in items:
            out.append(item_section(item, decision_words(state, item.item_id)))
    return "\n".join(out)


def listing_body(title: str, items: Sequence[review_pb.ReviewItem], agent: str) -> str:
    out = [
        f"# {title}",
        "",
        f"Agent `{agent}`, {len(items)} found. Proposals only: "
        "`memoryd vault review prepare` puts them in a bundle to approve.",
        "",
    ]
    out += [item_section(i) for i in items]
    return "\n".join(out)


# -- dashboards and records ------------------------------------------------------------


def dashboard_numbers(memories: Iterable[pb.Memory], now: datetime) -> dict[str, Any]:
    rows = list(memories)
    stale_before = now - timedelta(days=STALE_DAYS)
    stale = [
        m for m in rows if (_ts(m.last_accessed_at) or _ts(m.created_at) or now) <= stale_before
    ]
    return {
        "total": len(rows),
        "by_agent": dict(sorted(Counter(m.agent_id for m in rows).items())),
        "by_scope": dict(sorted(Counter(m.scope for m in rows).items())),
        "by_category": dict(sorted(Counter(CATEGORY.get(m.category, "?") for m in rows).items())),
        "recent": sorted(rows, key=lambda m: (m.created_at.seconds, m.id), reverse=True)[:20],
        "stale": stale[:50],
        "stale_count": len(stale),
        "top_recalled": sorted(
            (m for m in rows if m.access_count), key=lambda m: (-m.access_count, m.id)
        )[:10],
    }


def _count_table(title: str, counts: Mapping[str, int]) -> list[str]:
    out = [f"## {title}", "", "| | memories |", "| --- | ---: |"]
    out += [f"| {escape(k, 100)} | {v} |" for k, v in counts.items()]
    return [*out, ""]


def _memory_rows(rows: Iterable[pb.Memory]) -> list[str]:
    out = [
        "| id | scope | category | created | recalled | text |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    for m in rows:
        out.append(
            f"| {code(m.id[:8])} | {escape(m.scope, 100)} | {CATEGORY.get(m.category, '?')} | "
            f"{_day(m.created_at)} | {m.access_count} | {escape(m.text, 160)} |"
        )
    return [*out, ""]


def dashboard_body(agent: str, numbers: Mapping[str, Any], stats: pb.StatsResponse) -> str:
    out = [
        f"# memoryd: what `{agent}` remembers",
        "",
        f"{numbers['total']} memories readable by `{agent}` (daemon Stats: {stats.total}; "
        f"expired, not yet swept: {stats.expired_pending}).",
        "",
    ]
    out += _count_table("By agent (owner)", numbers["by_agent"])
    out += _count_table("By scope", numbers["by_scope"])
    out += _count_table("By category", numbers["by_category"])
    out += ["## Recent", "", *_memory_rows(numbers["recent"])]
    out += [f"## Stale (not recalled for {STALE_DAYS} days): {numbers['stale_count']}", ""]
    out += _memory_rows(numbers["stale"])
    out += ["## Top recalled", "", *_memory_rows(numbers["top_recalled"])]
    return "\n".join(out)


def dashboard_front(agent: str, numbers: Mapping[str, Any], built: str) -> dict[str, Any]:
    return {
        "type": "memoryd-dashboard",
        "agent": agent,
        "built": built,
        "total": numbers["total"],
        "staleCount": numbers["stale_count"],
        "byScope": numbers["by_scope"],
        "byCategory": numbers["by_category"],
        "byAgent": numbers["by_agent"],
    }


def records_notes(
    agent: str, memories: Iterable[pb.Memory], built: str
) -> dict[str, tuple[dict[str, Any], str]]:
    """One note per owner and category: name -> (front matter, body)."""
    groups: dict[tuple[str, str], list[pb.Memory]] = {}
    for m in memories:
        groups.setdefault((m.agent_id, CATEGORY.get(m.category, "other")), []).append(m)
    notes = {}
    for (owner, category), rows in sorted(groups.items()):
        front = {
            "type": "memoryd-record",
            "viewer": agent,
            "owner": owner,
            "category": category,
            "count": len(rows),
            "scopes": sorted({m.scope for m in rows}),
            "built": built,
        }
        body = "\n".join([f"# {escape(owner, 64)} · {category}", "", *_memory_rows(rows)])
        notes[f"records/{owner}--{category}.md"] = (front, body)
    return notes


README_BODY = """# memoryd review vault

memoryd is the source of truth; this folder is a view of it and an inbox of proposals.
Rebuild it with `memoryd vault build`; nothing here is read back into memory except through
explicit commands.

- `dashboards/` counts by agent, scope and category, recent, stale, top recalled
- `records/` one note per owner and category (front matter for Dataview / Bases)
- `review-bundles/` proposals to approve (`<id>.md`) and their state (`<id>.state.json`)
- `conflicts/`, `duplicate-candidates/` listings of those proposals
- `doctor/` the last `memoryd vault doctor`
- `proposals/` new versions of managed blocks a person had edited (not overwritten)
- `managed-blocks.log.jsonl` every managed-block write

Text you add after a `memoryd:managed:end` marker is kept. Editing inside a managed block
stops memoryd from updating it: its next version goes to `proposals/` instead.
"""
