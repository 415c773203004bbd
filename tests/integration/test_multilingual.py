"""Memories in the six languages of the capture rules (en, de, zh, ja, ko, cs) come back
through Recall and BuildContext, with their language; time filters and time expressions
over the wire."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from memoryd_client import MemorydError
from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hpb
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hgrpc

pytestmark = pytest.mark.integration

# language -> five memories, a question about the first one, a word the first one holds;
# shared with the OpenClaw plugin's test (clients/openclaw/test/openclaw.test.ts)
SIX_LANGUAGES = json.loads(
    (Path(__file__).parents[1] / "data" / "six_languages.json").read_text(encoding="utf-8")
)
CORPUS = {
    lang: (case["memories"], case["question"], case["word"]) for lang, case in SIX_LANGUAGES.items()
}


def ts(value: datetime) -> Timestamp:
    t = Timestamp()
    t.FromDatetime(value)
    return t


@pytest.fixture
def hooks(channel: grpc.Channel) -> hgrpc.HookServiceStub:
    return hgrpc.HookServiceStub(channel)


@pytest.mark.parametrize("language", sorted(CORPUS))
def test_a_memory_in_each_language_comes_back_through_recall_and_build_context(  # type: ignore[no-untyped-def]
    client, hooks, new_agent, language: str
) -> None:
    texts, question, word = CORPUS[language]
    agent = new_agent()
    ids = [client.store(agent, t).memory.id for t in texts]
    stored = client.get(agent, ids[0])
    assert stored.language == language

    got = client.recall(agent, question, limit=3, explain=True)
    assert got.results[0].memory.id == ids[0]
    assert got.results[0].memory.language == language
    assert got.results[0].explain.query_language == language
    assert got.results[0].explain.bm25 > 0.0  # found by its words, not only by the vector

    # The hooks' own score floor (hooks.min_score), as auto-recall runs it: a language the
    # embedder was not trained on must not score under it for its best match.
    ctx = hooks.BuildContext(
        hpb.BuildContextRequest(agent_id=agent, session_id="s", prompt=question)
    )
    assert ctx.skipped_reason == ""
    assert ctx.results[0].memory.id == ids[0]
    assert word in ctx.context


def test_created_after_and_before_filter_and_time_expressions_boost(client, hooks, new_agent):  # type: ignore[no-untyped-def]
    agent = new_agent()
    ref = datetime(2026, 3, 18, 12, 0, tzinfo=UTC)  # a Wednesday
    old = client.store(
        agent, "We decided to use Postgres for the ledger", created_at=ref - timedelta(days=30)
    ).memory
    recent = client.store(
        agent,
        "We decided to move the ledger to SQLite",
        created_at=ref - timedelta(days=8),  # Tuesday of last week
    ).memory

    window = client.recall(
        agent,
        "what did we decide about the ledger?",
        created_after=ref - timedelta(days=60),
        created_before=ref - timedelta(days=20),
    )
    assert [r.memory.id for r in window.results] == [old.id]

    for query in (
        "what did we decide about the ledger last week?",
        "Was haben wir letzte Woche zum ledger entschieden?",
        "上周 ledger 我们决定了什么？",
        "先週 ledger について何を決めましたか",
        "¿qué decidimos la semana pasada sobre el ledger?",
        "что мы решили на прошлой неделе про ledger?",
    ):
        got = client.recall(
            agent, query, limit=2, explain=True, reference_time=ref, timezone="Europe/Berlin"
        )
        first = got.results[0]
        assert first.memory.id == recent.id, query
        assert first.explain.time_expression != ""
        assert first.explain.time_boost > 0.0
        start = first.explain.time_window_start.ToDatetime(tzinfo=UTC)
        assert start == datetime(2026, 3, 8, 23, 0, tzinfo=UTC)  # Monday 00:00 in Berlin

    ctx = hooks.BuildContext(
        hpb.BuildContextRequest(
            agent_id=agent,
            session_id="s",
            prompt="What did we decide about the ledger?",
            created_before=ts(ref - timedelta(days=20)),
            min_score=0.01,
        )
    )
    assert [r.memory.id for r in ctx.results] == [old.id]


def test_a_bad_time_zone_or_an_empty_window_is_invalid_argument(client, new_agent) -> None:  # type: ignore[no-untyped-def]
    agent = new_agent()
    client.store(agent, "The user likes tea")
    with pytest.raises(MemorydError) as e:
        client.recall(agent, "tea", timezone="Mars/Olympus_Mons")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "Mars/Olympus_Mons" in e.value.message
    now = datetime.now(UTC)
    with pytest.raises(MemorydError) as e:
        client.recall(agent, "tea", created_after=now, created_before=now)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


# language -> (query "what did I do in the garden yesterday", its time words, yesterday's
# memory, a shorter memory from the week before with the same words of the query, so its
# words alone rank it first)
YESTERDAY_IN_THE_GARDEN = {
    "ar": (
        "ماذا فعلت في الحديقة أمس؟",
        "أمس",
        "زرعت الورود الحمراء والبيضاء في الحديقة",
        "قصصت العشب في الحديقة",
    ),
    "th": (
        "เมื่อวานฉันทำอะไรในสวน",
        "เมื่อวาน",
        "ฉันปลูกดอกกุหลาบสีแดงและสีขาวในสวน",
        "ฉันตัดหญ้าในสวน",
    ),
    "vi": (
        "Hôm qua tôi đã làm gì trong vườn?",
        "Hôm qua",
        "Tôi trồng hoa hồng đỏ và trắng trong vườn",
        "Tôi cắt cỏ trong vườn",
    ),
}


@pytest.mark.parametrize("language", sorted(YESTERDAY_IN_THE_GARDEN))
def test_yesterday_in_arabic_thai_and_vietnamese_ranks_yesterdays_memory_first(  # type: ignore[no-untyped-def]
    client, new_agent, language: str
) -> None:
    query, words, yesterdays, decoys = YESTERDAY_IN_THE_GARDEN[language]
    agent = new_agent()
    ref = datetime(2026, 3, 18, 12, 0, tzinfo=UTC)  # a Wednesday
    yesterday = client.store(agent, yesterdays, created_at=ref - timedelta(days=1)).memory
    decoy = client.store(agent, decoys, created_at=ref - timedelta(days=8)).memory

    def ranked(**kw: object) -> list[str]:
        got = client.recall(
            agent, query, limit=2, reference_time=ref, timezone="Europe/Berlin", **kw
        )
        return [r.memory.id for r in got.results]

    # by its words alone the decoy comes first; "yesterday" in the query puts yesterday's first
    assert ranked(ignore_time_expressions=True) == [decoy.id, yesterday.id]
    assert ranked() == [yesterday.id, decoy.id]
    got = client.recall(
        agent, query, limit=2, explain=True, reference_time=ref, timezone="Europe/Berlin"
    )
    first, second = got.results
    assert first.explain.time_expression == words
    assert first.explain.time_window_start.ToDatetime(tzinfo=UTC) == datetime(
        2026, 3, 16, 23, 0, tzinfo=UTC
    )  # Tuesday 00:00 in Berlin
    assert first.explain.time_boost > 0.0
    assert second.explain.time_boost == 0.0
