"""The category names have one definition per side of the wire: the proto enum, and
core's Category that mirrors it; everything else (settings, ctl, the MCP tools, Stats)
derives its spelling from those."""

from __future__ import annotations

from pathlib import Path

import pytest
from memoryd_client import pb

from memoryd.config import load_settings
from memoryd.core.errors import ConfigError
from memoryd.core.records import CATEGORY_LABELS, Category


def test_core_categories_mirror_the_proto_enum() -> None:
    assert {c.wire_name: c.value for c in Category} == dict(pb.Category.items())


def test_every_spelling_derives_from_the_one_list() -> None:
    from memoryd_client.mcp_server import CATEGORY_NAMES

    assert (
        CATEGORY_LABELS == CATEGORY_NAMES == ("preference", "fact", "decision", "entity", "other")
    )
    assert [Category.from_label(label) for label in CATEGORY_LABELS] == list(Category)[1:]
    with pytest.raises(ValueError, match="'unspecified' is not a category"):
        Category.from_label("unspecified")


def test_settings_name_categories_by_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    good = tmp_path / "good.toml"
    good.write_text('[store]\nsupersede_categories = ["decision"]\n')
    assert load_settings(good).store.supersede_categories == ["decision"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[store]\nsupersede_categories = ["preferences"]\n')
    with pytest.raises(
        ConfigError,
        match=r"supersede_categories\.0: .*'preferences' is not a category \(preference",
    ):
        load_settings(bad)
