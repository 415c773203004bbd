"""Managed blocks: memoryd's part of a note is replaced, a person's text is untouched, and a
block a person edited is never overwritten."""

from __future__ import annotations

from memoryd_client.vault.blocks import find_block, render_block, update_note

HUMAN_BEFORE = "# My notes\n\nI wrote this myself. <!-- a comment of mine -->\n\n"
HUMAN_AFTER = "\n## Later\n\nMore of my own text, with `code` and a [[link]].\n"


def test_a_block_round_trips_with_human_text_around_it_untouched() -> None:
    note = HUMAN_BEFORE + render_block("summary", "first version\n") + HUMAN_AFTER
    block = find_block(note, "summary")
    assert block is not None and block.content == "first version\n" and not block.edited
    upd = update_note(note, "summary", "second version\nwith two lines\n")
    assert upd.action == "replaced"
    assert upd.text.startswith(HUMAN_BEFORE) and upd.text.endswith(HUMAN_AFTER)
    again = find_block(upd.text, "summary")
    assert again is not None and again.content == "second version\nwith two lines\n"
    same = update_note(upd.text, "summary", "second version\nwith two lines\n")
    assert same.action == "unchanged" and same.text == upd.text


def test_a_block_edited_by_a_person_is_left_as_it_is() -> None:
    note = HUMAN_BEFORE + render_block("summary", "memoryd wrote this\n") + HUMAN_AFTER
    edited = note.replace("memoryd wrote this", "a person corrected this")
    block = find_block(edited, "summary")
    assert block is not None and block.edited
    upd = update_note(edited, "summary", "memoryd's new version\n")
    assert upd.action == "edited_by_person" and upd.text == edited


def test_broken_markers_count_as_edited() -> None:
    note = HUMAN_BEFORE + render_block("summary", "x\n")
    broken = note.replace("<!-- memoryd:managed:end id=summary -->", "")
    upd = update_note(broken, "summary", "y\n")
    assert upd.action == "edited_by_person" and upd.text == broken


def test_a_note_without_the_block_gets_it_appended_and_keeps_its_text() -> None:
    upd = update_note(HUMAN_BEFORE.rstrip("\n"), "summary", "added\n")
    assert upd.action == "created"
    assert upd.text.startswith(HUMAN_BEFORE.rstrip("\n"))
    block = find_block(upd.text, "summary")
    assert block is not None and block.content == "added\n"
    assert update_note(None, "summary", "new\n").action == "created"


def test_two_blocks_are_independent() -> None:
    note = render_block("a", "one\n") + "between\n" + render_block("b", "two\n")
    upd = update_note(note, "b", "TWO\n")
    assert "between\n" in upd.text
    a, b = find_block(upd.text, "a"), find_block(upd.text, "b")
    assert a is not None and a.content == "one\n"
    assert b is not None and b.content == "TWO\n"
