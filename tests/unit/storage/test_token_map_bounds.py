"""A restart that reuses the token file checks its map as a whole: a record outside the
file (also where offset + size would wrap around in int64) makes it rewrite the file, and a
map whose scope is split into two runs still points every row at its own record."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memoryd.storage import token_map

from .test_token_file import assert_tokens
from .test_token_reuse import fill, map_of, open_repo, started


@pytest.mark.parametrize(
    "offset",
    [
        -1,
        "size",  # one past the file's end
        2**63 - 1,  # offset + header + count * dim wraps around in int64
        2**63 - 8,
    ],
)
async def test_a_map_pointing_a_record_outside_the_token_file_is_refused(
    tmp_path: Path, offset: int | str
) -> None:
    repo = open_repo(tmp_path)
    want = await fill(repo)
    repo.close()
    saved = token_map.read(map_of(tmp_path))
    k = int(np.flatnonzero(saved.counts >= 0)[0])
    saved.offsets = saved.offsets.copy()
    saved.offsets[k] = saved.header["file"]["size"] if offset == "size" else offset
    token_map.write(map_of(tmp_path), saved)
    again = open_repo(tmp_path)
    try:
        reused, why = started(again)
        assert not reused and "outside the token file" in why, why
        assert_tokens(again, want)
        assert not again.tokens_damaged
    finally:
        again.close()


async def test_a_map_with_a_scope_split_in_two_runs_points_every_row_right(
    tmp_path: Path,
) -> None:
    """The map's rows reordered (a[:4], b, a[4:], c), the postings renamed to it: every
    row's token vectors are still its own; the postings no longer fit the map (each of the
    first two saved partitions now has rows of a and b, its terms another row's): the
    sample analysed afresh catches it and every text is analysed."""
    from memoryd.storage import term_map

    from .test_postings_reuse import analysed, bm25_answers, lexical_state, terms_of
    from .test_postings_reuse import fill as fill_scopes
    from .test_token_reuse import toks

    repo = open_repo(tmp_path)
    ids = await fill_scopes(repo)
    want = {i: toks(n) for n, i in enumerate(ids) if n not in (0, 3, 4, 10)}
    want[ids[0]] = toks(99)
    repo.close()
    saved = token_map.read(map_of(tmp_path))
    scopes = [("agent:a", "agent:b", "agent:c")[ids.index(i) % 3] for i in saved.ids]
    where = {s: [k for k, x in enumerate(scopes) if x == s] for s in set(scopes)}
    order = where["agent:a"][:4] + where["agent:b"] + where["agent:a"][4:] + where["agent:c"]
    split = token_map.TokenMap(
        [saved.ids[k] for k in order],
        saved.offsets[order],
        saved.counts[order],
        saved.updated[order],
        saved.hashes[order],
        header=saved.header,
    )
    digest = token_map.write(map_of(tmp_path), split)
    postings = term_map.read(terms_of(tmp_path))
    postings.header = {**postings.header, "map": digest}
    term_map.write(terms_of(tmp_path), postings)
    again = open_repo(tmp_path)
    try:
        assert started(again)[0], started(again)[1]
        assert_tokens(again, want)
        assert again.postings_start.startswith("dropped: "), again.postings_start
        got = lexical_state(again), bm25_answers(again)
    finally:
        again.close()
    assert got == analysed(tmp_path)


@pytest.mark.parametrize("ids", [["a1", "b22", ""], ["a1", "Büro-7", "记忆", ""]])
def test_a_map_reads_back_every_id_ascii_or_not(tmp_path: Path, ids: list[str]) -> None:
    """The ids are written one after the other with their lengths in bytes (without a bytes
    object each when all are ASCII): a non-ASCII id (an Import may bring any) must read
    back whole, and so must its neighbours."""
    n = len(ids)
    rows = token_map.TokenMap(
        ids,
        np.arange(n, dtype=np.int64) * 100,
        np.array([3, -1, 0, 2][:n], dtype=np.int32),
        np.arange(n, dtype=np.int64) + 2**40,
        np.array([2**64 - 1, 0, 2**63, 7][:n], dtype=np.uint64),
    )
    digest = token_map.write(tmp_path / "map", rows)
    back = token_map.read(tmp_path / "map")
    assert back.ids == ids and back.digest == digest
    for column in ("offsets", "counts", "updated", "hashes"):
        np.testing.assert_array_equal(getattr(back, column), getattr(rows, column))
