"""The clients' agent affinity (memoryd_client.routing): the shared vectors every client's
tests check, and what rendezvous hashing promises a fleet's operator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from memoryd_client.routing import (
    Fleet,
    check_addresses,
    new_idempotency_key,
    normal_address,
    rendezvous_order,
    weight,
)

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "routing_vectors.json").read_text("utf-8")
)
FLEET = [f"memoryd-{i}.memoryd:50051" for i in range(4)]
AGENTS = [f"agent-{i}" for i in range(2000)]


def test_the_weight_is_the_first_8_bytes_of_sha256_as_coreutils_computes_it() -> None:
    # printf '10.0.0.1:50051\0main' | sha256sum | cut -c1-16
    assert weight("10.0.0.1:50051", "main").hex() == "dde3f8a563e88e1b"


@pytest.mark.parametrize(
    "case", VECTORS["weights"], ids=lambda c: f"{c['address']}/{c['agent_id']}"
)
def test_weights_match_the_shared_vectors(case: dict[str, str]) -> None:
    assert weight(case["address"], case["agent_id"]).hex() == case["weight"]


def test_orders_match_the_shared_vectors() -> None:
    assert len(VECTORS["orders"]) >= 20
    for case in VECTORS["orders"]:
        addresses = case["addresses"]
        got = [addresses[i] for i in rendezvous_order(addresses, case["agent_id"])]
        assert got == case["order"], case


def test_an_address_with_or_without_a_scheme_is_one_daemon() -> None:
    assert normal_address("HTTP://10.0.0.5:50051/") == "10.0.0.5:50051"
    assert normal_address("https://m.example:443") == "m.example:443"
    assert weight("http://10.0.0.5:50051", "a") == weight("10.0.0.5:50051", "a")
    with pytest.raises(ValueError, match="name the same daemon"):
        check_addresses(["10.0.0.5:50051", "http://10.0.0.5:50051/"])
    with pytest.raises(ValueError, match="at least one"):
        check_addresses([])


def test_agents_spread_over_the_fleet_and_the_order_does_not_depend_on_the_list_order() -> None:
    firsts = Counter(FLEET[rendezvous_order(FLEET, a)[0]] for a in AGENTS)
    assert set(firsts) == set(FLEET)
    assert min(firsts.values()) > len(AGENTS) / len(FLEET) * 0.8, firsts
    shuffled = FLEET[2:] + FLEET[:2]
    for a in AGENTS[:200]:
        assert [FLEET[i] for i in rendezvous_order(FLEET, a)] == [
            shuffled[i] for i in rendezvous_order(shuffled, a)
        ]


def test_removing_a_daemon_moves_only_its_own_agents_each_to_its_second_choice() -> None:
    gone = FLEET[1]
    rest = [a for a in FLEET if a != gone]
    for agent in AGENTS:
        before = [FLEET[i] for i in rendezvous_order(FLEET, agent)]
        after = [rest[i] for i in rendezvous_order(rest, agent)]
        assert after == [a for a in before if a != gone]


def test_a_daemon_marked_down_goes_last_until_marked_up() -> None:
    fleet = Fleet(FLEET, down_for=60.0)
    agent = AGENTS[0]
    order = fleet.order(agent)
    fleet.mark_down(order[0])
    assert fleet.order(agent) == order[1:] + order[:1]
    assert fleet.is_down(order[0])
    fleet.mark_up(order[0])
    assert fleet.order(agent) == order


def test_a_down_mark_lapses_after_down_for() -> None:
    fleet = Fleet(FLEET, down_for=0.0)
    order = fleet.order("x")
    fleet.mark_down(order[0])
    assert fleet.order("x") == order


def test_new_keys_are_distinct_and_fit_captures_limit() -> None:
    keys = {new_idempotency_key() for _ in range(1000)}
    assert len(keys) == 1000
    assert all(len(k) == 36 for k in keys)  # Capture allows 124 (128 less ":999")
