"""Managed blocks: the parts of a note memoryd owns, between markers

    <!-- memoryd:managed:start id=dashboard hash=sha256:<hex of the content> -->
    ...content...
    <!-- memoryd:managed:end id=dashboard -->

Text outside the markers is never touched. When memoryd re-renders a block it compares the
block's current content with the hash in its start marker: equal, the block is replaced;
different, a person edited it, so the block is left as it is and the new content becomes a
proposal (the caller writes it elsewhere and logs it). A note without the block gets it
appended at the end.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")
_START_RE = re.compile(
    r"<!-- memoryd:managed:start id=(?P<id>[A-Za-z0-9._-]{1,64}) "
    r"hash=sha256:(?P<hash>[0-9a-f]{64}) -->\n"
)


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def render_block(block_id: str, content: str) -> str:
    if not _ID_RE.match(block_id):
        raise ValueError(f"block id {block_id!r} is invalid")
    if not content.endswith("\n"):
        content += "\n"
    return (
        f"<!-- memoryd:managed:start id={block_id} hash=sha256:{content_hash(content)} -->\n"
        f"{content}<!-- memoryd:managed:end id={block_id} -->\n"
    )


@dataclass(frozen=True, slots=True)
class Block:
    block_id: str
    recorded_hash: str
    content: str
    start: int  # offsets of the whole block (start marker to end marker's newline)
    end: int

    @property
    def edited(self) -> bool:
        return content_hash(self.content) != self.recorded_hash


def find_block(note: str, block_id: str) -> Block | None:
    for m in _START_RE.finditer(note):
        if m.group("id") != block_id:
            continue
        end_marker = f"<!-- memoryd:managed:end id={block_id} -->"
        end = note.find(end_marker, m.end())
        if end < 0:
            return None  # an unterminated block is treated as edited by a person: left alone
        stop = end + len(end_marker)
        if note[stop : stop + 1] == "\n":
            stop += 1
        return Block(block_id, m.group("hash"), note[m.end() : end], m.start(), stop)
    return None


@dataclass(frozen=True, slots=True)
class Update:
    text: str  # the note to write (unchanged when the block was edited)
    action: str  # "created", "replaced", "unchanged", "edited_by_person"


def update_note(note: str | None, block_id: str, content: str) -> Update:
    """The note with block ``block_id`` set to ``content``, unless a person edited it."""
    rendered = render_block(block_id, content)
    if note is None:
        return Update(rendered, "created")
    if (
        "<!-- memoryd:managed:start id=" + block_id + " " in note
        and find_block(note, block_id) is None
    ):
        return Update(note, "edited_by_person")  # markers broken by hand
    block = find_block(note, block_id)
    if block is None:
        sep = "" if note.endswith("\n") or not note else "\n"
        return Update(note + sep + "\n" + rendered, "created")
    if block.edited:
        return Update(note, "edited_by_person")
    new = note[: block.start] + rendered + note[block.end :]
    return Update(new, "unchanged" if new == note else "replaced")
