from __future__ import annotations

import logging

import pytest
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb

from memoryd.api.decoding import RateLimitedWarning, Undecodable, lenient


def test_a_body_that_does_not_decode_becomes_a_marker_naming_the_message() -> None:
    decode = lenient(pb.StoreRequest.FromString, "/memoryd.v1.MemoryService/Store")
    marker = decode(b"\x0a\x02\xff\xfe")
    assert isinstance(marker, Undecodable)
    assert "memoryd.v1.StoreRequest" in marker.message and "4 bytes" in marker.message
    assert decode(pb.StoreRequest(agent_id="a").SerializeToString()).agent_id == "a"


def test_the_request_id_of_a_stream_frame_is_read_when_it_leads() -> None:
    raw = pb.StreamRequest(
        request_id="op-7", store=pb.StoreRequest(text="PLACEHOLDER")
    ).SerializeToString()
    marker = Undecodable("memoryd.v1.StreamRequest", raw.replace(b"PLACEHOLDER", b"\xff" * 11))
    assert marker.leading_string() == "op-7"
    assert Undecodable("x", b"\xff\xff").leading_string() == ""
    assert Undecodable("x", b"\x0a\x7f\x61").leading_string() == ""  # length past the end
    assert Undecodable("x", b"\x0a\x01\xff").leading_string() == ""  # not UTF-8


def test_warnings_are_rate_limited_and_count_what_was_held(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    warn = RateLimitedWarning(logging.getLogger("memoryd.test"), every=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        for _ in range(50):
            warn("bad body")
            now[0] += 0.1
    assert [r.getMessage() for r in caplog.records] == ["bad body"]
    now[0] += 10
    with caplog.at_level(logging.WARNING):
        warn("bad body")
    assert caplog.records[-1].getMessage() == "bad body (and 49 more like it not logged)"
