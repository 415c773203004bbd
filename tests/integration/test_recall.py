"""Recall: relevance order, limit, min_score, category and scope filters, refusals."""

from __future__ import annotations

import grpc
import pytest
from memoryd_client import pb

pytestmark = pytest.mark.integration

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def test_recall_ranks_the_matching_memory_first(client, new_agent, seed, facts):
    agent = new_agent()
    stored = {m.text: m for m in seed(agent, facts[:12])}
    r = client.recall(agent, "which database do we run in production?")
    assert r.results[0].memory.id == stored["Our production database runs PostgreSQL 16."].id
    scores = [h.score for h in r.results]
    assert scores == sorted(scores, reverse=True)
    # Recalling a memory by its own text finds that memory first.
    exact = client.recall(agent, "The user is allergic to peanuts.", limit=1).results[0]
    assert exact.memory.id == stored["The user is allergic to peanuts."].id


def test_recall_returns_at_most_limit_default_five(client, new_agent, seed, facts):
    agent = new_agent()
    user_facts = [t for t in facts if t.startswith("The user")][:8]
    seed(agent, user_facts)
    query = "What do we know about the user?"
    assert len(client.recall(agent, query).results) == 5
    assert len(client.recall(agent, query, limit=3).results) == 3
    assert len(client.recall(agent, query, limit=1).results) == 1
    every = client.recall(agent, query, limit=100).results
    assert len(every) == 8
    assert len({h.memory.id for h in every}) == 8


def test_recall_limit_over_100_is_refused(client, new_agent, rejects):
    agent = new_agent()
    rejects(
        INVALID,
        client.recall,
        agent,
        "anything",
        limit=101,
        mentions=["101", "100", "recall.max_limit"],
    )


def test_min_score_drops_weaker_matches(client, new_agent, seed, facts):
    agent = new_agent()
    seed(agent, facts[:10])
    query = "The user is allergic to peanuts."
    loose = client.recall(agent, query, limit=10).results
    assert len(loose) > 2
    assert loose[0].memory.text == query
    # A threshold between the best and the runner-up keeps the best, drops the rest.
    threshold = (loose[0].score + loose[1].score) / 2
    strict = client.recall(agent, query, limit=10, min_score=threshold).results
    assert strict, "the best match was dropped"
    assert strict[0].memory.text == query
    assert all(h.score >= threshold for h in strict)
    assert len(strict) < len(loose)
    some = client.recall(agent, query, limit=10, min_score=loose[-1].score + 0.01).results
    assert all(h.score >= loose[-1].score + 0.01 for h in some)
    assert client.recall(agent, "quarterly tax filing deadlines", min_score=0.99).results == []


@pytest.mark.parametrize("min_score", [1.5, -0.5, float("nan")])
def test_min_score_outside_0_to_1_is_refused(client, new_agent, rejects, min_score):
    rejects(INVALID, client.recall, new_agent(), "x", min_score=min_score, mentions=["min_score"])


def test_recall_filters_by_category(client, new_agent):
    agent = new_agent()
    pref = client.store(agent, "The user prefers dark mode.", category=pb.CATEGORY_PREFERENCE)
    fact = client.store(agent, "The user's laptop is dark grey.", category=pb.CATEGORY_FACT)
    only_facts = client.recall(agent, "dark", categories=[pb.CATEGORY_FACT], limit=10)
    assert [h.memory.id for h in only_facts.results] == [fact.memory.id]
    both = client.recall(
        agent, "dark", categories=[pb.CATEGORY_FACT, pb.CATEGORY_PREFERENCE], limit=10
    )
    assert {h.memory.id for h in both.results} == {pref.memory.id, fact.memory.id}


@pytest.mark.parametrize(
    ("kw", "code", "mentions"),
    [
        ({"query": ""}, INVALID, ["query", "empty"]),
        ({"query": "   \n "}, INVALID, ["query", "empty"]),
        ({"query": "q" * 10_001}, INVALID, ["query", "store.max_chars"]),
        ({"query": "x", "categories": [99]}, INVALID, ["categories", "99"]),
        ({"query": "x", "scopes": ["bad scope!"]}, INVALID, ["scope", "bad scope!"]),
        (
            {"query": "x", "scopes": ["agent:somebody-else"]},
            grpc.StatusCode.PERMISSION_DENIED,
            ["agent:somebody-else"],
        ),
    ],
)
def test_bad_recall_is_refused(client, new_agent, rejects, kw, code, mentions):
    query = kw.pop("query")
    rejects(code, client.recall, new_agent(), query, mentions=mentions, **kw)


def test_recall_within_an_own_scope(client, new_agent, seed):
    agent = new_agent()
    (m,) = seed(agent, ["The user's daughter starts school in autumn."])
    r = client.recall(agent, "school", scopes=[f"agent:{agent}"])
    assert [h.memory.id for h in r.results] == [m.id]
    assert client.recall(agent, "school", scopes=["global"]).results == []
