"""Memories in the six languages of the capture rules (en, de, zh, ja, ko, cs) come back
through Recall and BuildContext, with their language; time filters and time expressions
over the wire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from memoryd_client import MemorydError
from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hpb
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hgrpc

pytestmark = pytest.mark.integration

# language -> (ten memories, a question about the first one, a word the first one holds)
CORPUS = {
    "en": (
        [
            "My sister's wedding is in Lisbon next spring",
            "The quarterly budget review moved to Thursday",
            "The user plays the cello on weekends",
            "Our staging server runs out of disk space every month",
            "The user is allergic to shellfish",
        ],
        "where is my sister's wedding?",
        "Lisbon",
    ),
    "de": (
        [
            "Die Hochzeit meiner Schwester findet im Frühling in Lissabon statt",
            "Die Quartalsplanung wurde auf Donnerstag verschoben",
            "Der Nutzer spielt am Wochenende Cello",
            "Unserem Testserver geht jeden Monat der Speicherplatz aus",
            "Der Nutzer ist gegen Meeresfrüchte allergisch",
        ],
        "Wo findet die Hochzeit meiner Schwester statt?",
        "Lissabon",
    ),
    "zh": (
        [
            "我妹妹的婚礼明年春天在里斯本举行",
            "季度预算评审改到了星期四",
            "用户周末喜欢拉大提琴",
            "我们的测试服务器每个月都会磁盘空间不足",
            "用户对贝类海鲜过敏",
        ],
        "我妹妹的婚礼在哪里举行？",
        "里斯本",
    ),
    "ja": (
        [
            "妹の結婚式は来年の春にリスボンで行われます",
            "四半期の予算レビューは木曜日に変更されました",
            "ユーザーは週末にチェロを弾きます",
            "テストサーバーは毎月ディスク容量が足りなくなります",
            "ユーザーは甲殻類アレルギーです",
        ],
        "妹の結婚式はどこで行われますか？",
        "リスボン",
    ),
    "ko": (
        [
            "여동생의 결혼식은 내년 봄 리스본에서 열립니다",
            "분기 예산 검토가 목요일로 옮겨졌습니다",
            "사용자는 주말에 첼로를 연주합니다",
            "테스트 서버는 매달 디스크 공간이 부족합니다",
            "사용자는 갑각류 알레르기가 있습니다",
        ],
        "여동생의 결혼식은 어디에서 열립니까?",
        "리스본",
    ),
    "cs": (
        [
            "Svatba mé sestry se koná příští jaro v Lisabonu",
            "Čtvrtletní kontrola rozpočtu se přesunula na čtvrtek",
            "Uživatel o víkendech hraje na violoncello",
            "Našemu testovacímu serveru každý měsíc dochází místo na disku",
            "Uživatel je alergický na korýše",
        ],
        "Kde se koná svatba mé sestry?",
        "Lisabonu",
    ),
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

    ctx = hooks.BuildContext(
        hpb.BuildContextRequest(agent_id=agent, session_id="s", prompt=question, min_score=0.01)
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
