"""Update: text (re-embedded), importance, category, metadata, expiry; refusals change
nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from memoryd_client import pb

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def test_update_text_re_embeds_the_memory(client, new_agent, seed, content):
    agent = new_agent()
    old_text = "The user's favourite colour is green."
    target, blue, _ = seed(
        agent,
        [
            old_text,
            "The user's favourite colour is blue.",
            "The marketing site is built with Astro.",
        ],
    )
    new_text = "The user drinks espresso every morning."
    updated = client.update(agent, target.id, text=new_text).memory
    assert updated.id == target.id
    assert updated.text == new_text
    assert new_text in updated.summary
    assert updated.created_at == target.created_at
    assert updated.updated_at.ToDatetime() >= target.updated_at.ToDatetime()
    assert content(client.get(agent, target.id)) == content(updated)

    by_new = client.recall(agent, "What does the user drink in the morning?").results
    assert by_new[0].memory.id == target.id
    assert by_new[0].memory.text == new_text
    by_old = client.recall(agent, old_text, limit=10).results
    assert by_old[0].memory.id == blue.id
    assert client.stats(agent).total == 3
    # The old text is no longer stored, so storing it again is a new memory.
    assert client.store(agent, old_text).outcome == pb.STORE_OUTCOME_CREATED


def test_update_importance_and_category(client, new_agent, seed, content):
    agent = new_agent()
    (m,) = seed(agent, ["Security patches must ship within 48 hours."])
    u = client.update(agent, m.id, importance=0.95, category=pb.CATEGORY_DECISION).memory
    assert u.importance == pytest.approx(0.95)
    assert u.category == pb.CATEGORY_DECISION
    assert u.text == m.text
    assert content(client.get(agent, m.id)) == content(u)
    assert client.stats(agent).by_category == {"CATEGORY_DECISION": 1}


def test_update_metadata_merges_replaces_and_removes(client, new_agent):
    agent = new_agent()
    m = client.store(agent, "Carol owns the mobile app release process.", metadata={"a": "1"})
    mid = m.memory.id
    merged = client.update(agent, mid, metadata={"b": "2"}).memory
    assert dict(merged.metadata) == {"a": "1", "b": "2"}
    removed = client.update(agent, mid, remove_metadata_keys=["a"]).memory
    assert dict(removed.metadata) == {"b": "2"}
    replaced = client.update(agent, mid, metadata={"c": "3"}, replace_metadata=True).memory
    assert dict(replaced.metadata) == {"c": "3"}
    assert dict(client.get(agent, mid).metadata) == {"c": "3"}


def test_update_expiry_set_and_clear(client, new_agent):
    agent = new_agent()
    mid = client.store(agent, "Eve is on parental leave until September.").memory.id
    later = datetime.now(UTC) + timedelta(days=90)
    u = client.update(agent, mid, expires_at=later).memory
    assert u.expires_at.ToDatetime(tzinfo=UTC) == later
    cleared = client.update(agent, mid, clear_expires_at=True).memory
    assert not cleared.HasField("expires_at")
    assert not client.get(agent, mid).HasField("expires_at")


@pytest.mark.parametrize(
    ("kw", "mentions"),
    [
        pytest.param({"importance": 1.5}, ["importance", "between 0 and 1"], id="importance"),
        pytest.param({"importance": float("nan")}, ["importance"], id="importance-nan"),
        pytest.param({"text": " \n "}, ["text", "empty"], id="empty-text"),
        pytest.param({"text": "y" * 10_001}, ["10001", "10000", "store.max_chars"], id="long-text"),
        pytest.param({"category": 42}, ["category", "42"], id="unknown-category"),
        pytest.param({}, ["changes nothing"], id="no-change"),
        pytest.param({"metadata": {"": "v"}}, ["metadata key"], id="empty-metadata-key"),
        pytest.param(
            {"expires_at": datetime(2020, 1, 1, tzinfo=UTC)}, ["expires_at", "past"], id="past"
        ),
        pytest.param(
            {"expires_at": datetime(2099, 1, 1, tzinfo=UTC), "clear_expires_at": True},
            ["expires_at", "clear_expires_at"],
            id="set-and-clear-expiry",
        ),
        pytest.param(
            {"text": "Something else entirely.", "importance": 2.0},
            ["importance"],
            id="valid-text-bad-importance",
        ),
    ],
)
def test_invalid_update_is_refused_and_changes_nothing(
    client, new_agent, rejects, snapshot, content, kw, mentions
):
    agent = new_agent()
    m = client.store(agent, "Frank handles vendor contracts and procurement.").memory
    before = snapshot(agent)
    rejects(INVALID, client.update, agent, m.id, mentions=mentions, **kw)
    assert snapshot(agent) == before
    assert content(client.get(agent, m.id)) == content(m)


def test_update_of_a_malformed_or_absent_id_is_refused(client, new_agent, rejects):
    agent = new_agent()
    rejects(INVALID, client.update, agent, "123", importance=0.5, mentions=["'123'", "UUID"])
    missing = str(uuid.uuid4())
    rejects(
        grpc.StatusCode.NOT_FOUND,
        client.update,
        agent,
        missing,
        importance=0.5,
        mentions=[missing],
    )
