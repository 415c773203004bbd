"""Fuzzing the wire against one real daemon.

Every RPC of every memoryd service, found from the generated descriptors (so a new RPC is
fuzzed without touching this file), gets (1) messages hypothesis builds from its request
type's descriptor, field by field, with values both plausible (known agents, scopes,
texts, UUIDs) and hostile (NUL, invisible and control characters, extreme numbers, NaN,
unknown enum values, deep nesting), and (2) raw bytes, also sent to health and
reflection: valid messages mutated (bits flipped, bytes inserted, cut short) and plain
garbage, sent through a generic channel method with identity serializers; client-streaming
RPCs (Stream, Import, reflection) get a few such frames each. After every call:

- the daemon is alive;
- the answer is never UNKNOWN or INTERNAL (bad input is the caller's error, not a bug),
  neither as the RPC's status nor as a Stream op's or an Import entry's error;
- a refused request (every op of it refused) wrote nothing: the store's commit and
  rows-written counters (metrics) are unchanged;
- each Stream frame is answered exactly once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as d
from google.protobuf import message_factory
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memoryd_client._gen.memoryd.v1 import hooks_pb2, memory_pb2

pytestmark = pytest.mark.fuzz

FUZZ = settings(
    max_examples=int(os.environ.get("MEMORYD_FUZZ_EXAMPLES", "30")),
    derandomize=not os.environ.get("MEMORYD_FUZZ_RANDOM"),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
BUGS = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
BUG_NAMES = {code.name for code in BUGS}
TIMEOUT = 60.0

METHODS: list[d.MethodDescriptor] = [
    method
    for module in (memory_pb2, hooks_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
    for method in service.methods
]
# The services served beside them take the raw bytes too (Health.Watch never ends: left out).
SERVED_BESIDE = [
    health_pb2.DESCRIPTOR.services_by_name["Health"].methods_by_name["Check"],
    *reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"].methods,
]


def _id(method: d.MethodDescriptor) -> str:
    return f"{method.containing_service.name}.{method.name}"


AGENTS = ["fz-a", "fz-b", "fz-c"]
PLAUSIBLE = [
    *AGENTS,
    "",
    "agent:fz-a",
    "agent:fz-b",
    "global",
    "workspace:fz",
    "The user prefers dark mode in the code editor.",
    "Our production database runs PostgreSQL 16.",
    "remember that the team meets every Monday at 10am",
    "00000000-0000-4000-8000-000000000001",
    "9b2f3c1e-8d7a-4b6c-9e5f-0a1b2c3d4e5f",
    "session-1",
    "user",
]
# Half of the messages are plausible throughout (these values by field name, small
# numbers, known enum values), so the fuzzing also reaches past validation into the
# paths that write, recall and link.
SCOPES = ["agent:fz-a", "agent:fz-b", "global", "workspace:fz"]
TEXTS = st.builds(
    "{} ({})".format,
    st.sampled_from([p for p in PLAUSIBLE if len(p) > 30]),
    st.integers(0, 10**6),
)
BY_NAME: dict[str, st.SearchStrategy[Any]] = {
    "agent_id": st.sampled_from(AGENTS),
    "scope": st.sampled_from(SCOPES),
    "scopes": st.sampled_from(SCOPES),
    "text": TEXTS,
    "query": TEXTS,
    "prompt": TEXTS,
    "role": st.sampled_from(["user", "assistant"]),
    "id": st.sampled_from([p for p in PLAUSIBLE if p.count("-") == 4]),
}
HOSTILE_CHARS = "\x00\x01\x1b\x7f\u200b\u200e\u202e\ufeff\u2028\ufffd"
TEXT = st.one_of(
    st.sampled_from(PLAUSIBLE),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
    st.text(st.sampled_from(HOSTILE_CHARS + " a"), max_size=20),
)


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return st.one_of(st.sampled_from([0, 1, 5, lo, hi]), st.integers(lo, hi))


T = d.FieldDescriptor
SCALARS: dict[int, st.SearchStrategy[Any]] = {
    T.TYPE_STRING: TEXT,
    T.TYPE_BYTES: st.binary(max_size=32),
    T.TYPE_BOOL: st.booleans(),
    T.TYPE_INT32: _ints(32, True),
    T.TYPE_SINT32: _ints(32, True),
    T.TYPE_SFIXED32: _ints(32, True),
    T.TYPE_UINT32: _ints(32, False),
    T.TYPE_FIXED32: _ints(32, False),
    T.TYPE_INT64: _ints(64, True),
    T.TYPE_SINT64: _ints(64, True),
    T.TYPE_SFIXED64: _ints(64, True),
    T.TYPE_UINT64: _ints(64, False),
    T.TYPE_FIXED64: _ints(64, False),
    T.TYPE_FLOAT: st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(width=32)),
    T.TYPE_DOUBLE: st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats()),
}
MAX_DEPTH = 3


def _scalar(field: d.FieldDescriptor, plausible: bool = False) -> st.SearchStrategy[Any]:
    if field.type == T.TYPE_ENUM:
        known = st.sampled_from([v.number for v in field.enum_type.values])
        return known if plausible else st.one_of(known, st.integers(-3, 1000))  # open enums
    if plausible:
        if field.type == T.TYPE_STRING:
            return BY_NAME.get(field.name, st.sampled_from(PLAUSIBLE))
        if field.type in (T.TYPE_FLOAT, T.TYPE_DOUBLE):
            return st.floats(0.0, 1.0)
        if field.type not in (T.TYPE_BOOL, T.TYPE_BYTES):
            return st.integers(0, 10)
    return SCALARS[field.type]


def _is_map(field: d.FieldDescriptor) -> bool:
    return field.type == T.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _repeated(field: d.FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _wanted(draw: st.DrawFn, field: d.FieldDescriptor, plausible: bool) -> bool:
    """Whether to set ``field``: half the time; in a plausible message, always the fields
    a request needs (agent, text, id ...) and now and then one of the others."""
    if not plausible:
        return draw(st.booleans())
    if field.name in BY_NAME:
        return True
    if field.type == T.TYPE_MESSAGE and field.message_type.full_name.startswith("google."):
        return False  # random timestamps are mostly in the past: refused
    return draw(st.integers(0, 3)) == 0


@st.composite
def messages(
    draw: st.DrawFn, desc: d.Descriptor, depth: int = 0, plausible: bool | None = None
) -> Any:
    """A message of type ``desc`` with a random subset of its fields set."""
    if plausible is None:
        plausible = draw(st.booleans())
    msg = message_factory.GetMessageClass(desc)()
    chosen = {o.name: draw(st.sampled_from([None, *o.fields])) for o in desc.oneofs}
    for field in desc.fields:
        oneof = field.containing_oneof
        if oneof is not None and chosen[oneof.name] is not field:
            continue
        if oneof is None and not _wanted(draw, field, plausible):
            continue
        value = getattr(msg, field.name) if field.type == T.TYPE_MESSAGE else None
        if _is_map(field):
            key_f, value_f = (
                field.message_type.fields_by_name["key"],
                field.message_type.fields_by_name["value"],
            )
            for key in draw(st.lists(_scalar(key_f, plausible), max_size=3)):
                if value_f.type == T.TYPE_MESSAGE:
                    if depth < MAX_DEPTH:
                        value[key].CopyFrom(
                            draw(messages(value_f.message_type, depth + 1, plausible))
                        )
                else:
                    value[key] = draw(_scalar(value_f, plausible))
        elif field.type == T.TYPE_MESSAGE:
            if depth >= MAX_DEPTH:
                continue
            child = messages(field.message_type, depth + 1, plausible)
            if _repeated(field):
                for item in draw(st.lists(child, max_size=3)):
                    value.add().CopyFrom(item)
            else:
                value.CopyFrom(draw(child))
        elif _repeated(field):
            getattr(msg, field.name).extend(draw(st.lists(_scalar(field, plausible), max_size=4)))
        else:
            setattr(msg, field.name, draw(_scalar(field, plausible)))
    return msg


@st.composite
def mutated(draw: st.DrawFn, desc: d.Descriptor) -> bytes:
    """A valid ``desc`` message's bytes, damaged; or plain garbage."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(min_size=1, max_size=64))
    raw = bytearray(draw(messages(desc)).SerializeToString())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "varint"]))
        at = draw(st.integers(0, len(raw)))
        if kind == "flip" and raw:
            at = min(at, len(raw) - 1)
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del raw[at : at + draw(st.integers(1, 4))]
        elif kind == "truncate":
            del raw[at:]
        elif kind == "varint":  # a field header with a huge length or an invalid wire type
            raw[at:at] = draw(st.sampled_from([b"\x0a\xff\xff\xff\xff\x0f", b"\x0f", b"\xff"]))
    return bytes(raw)


def _identity(b: bytes) -> bytes:
    return b


def _path(method: d.MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def _errors_in(method: d.MethodDescriptor, responses: list[bytes]) -> tuple[list[str], bool]:
    """The code names of per-item errors in the responses, and whether every item of the
    request was refused (nothing in it can have been written)."""
    output = message_factory.GetMessageClass(method.output_type)
    names: list[str] = []
    refused_all = True
    for raw in responses:
        response = output.FromString(raw)
        if method.output_type.name == "StreamResponse":
            if response.WhichOneof("result") == "error":
                names.append(response.error.code_name)
            else:
                refused_all = False
        elif method.output_type.name == "ImportResponse":
            names.extend(e.code_name for e in response.errors)
            refused_all = response.imported == 0
        else:
            refused_all = False
    return names, refused_all


def _call(channel: grpc.Channel, method: d.MethodDescriptor, frames: list[bytes]) -> Any:
    """Send ``frames`` (one for a unary request) as raw bytes; returns the status code and
    the raw responses."""
    kind = (method.client_streaming, method.server_streaming)
    make: Callable[..., Any] = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }[kind]
    call = make(_path(method), request_serializer=_identity, response_deserializer=_identity)
    request: Any = iter(frames) if method.client_streaming else frames[0]
    responses: list[bytes] = []
    try:
        if method.server_streaming:
            for response in call(request, timeout=TIMEOUT):
                responses.append(response)
        else:
            responses.append(call(request, timeout=TIMEOUT))
    except grpc.RpcError as error:
        return error.code(), error.details(), responses
    return grpc.StatusCode.OK, "", responses


def check(daemon: Any, channel: grpc.Channel, method: d.MethodDescriptor, frames: list[bytes]):
    before = daemon.writes()
    code, details, responses = _call(channel, method, frames)
    assert daemon.alive(), f"memoryd died\n{daemon.log_tail()}"
    assert code not in BUGS, (code, details, frames)
    item_errors, refused_all = _errors_in(method, responses)
    assert not BUG_NAMES & set(item_errors), (item_errors, frames)
    if method.output_type.name == "StreamResponse" and code == grpc.StatusCode.OK:
        assert len(responses) == len(frames), (len(responses), frames)
    refused = code != grpc.StatusCode.OK or (method.client_streaming and refused_all)
    if refused:
        assert daemon.writes() == before, ("a refused request wrote", code, details, frames)


@pytest.fixture(scope="module")
def channel(fuzz_daemon: Any) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(fuzz_daemon.address) as ch:
        yield ch


def _frames(method: d.MethodDescriptor, one: st.SearchStrategy[bytes]) -> Any:
    return (
        st.lists(one, min_size=1, max_size=4) if method.client_streaming else one.map(lambda b: [b])
    )


@pytest.mark.parametrize("method", METHODS, ids=_id)
def test_messages_built_from_the_descriptor(daemon, channel, method):
    one = messages(method.input_type).map(lambda m: m.SerializeToString())

    @FUZZ
    @given(frames=_frames(method, one))
    def run(frames: list[bytes]) -> None:
        check(daemon, channel, method, frames)

    run()


@pytest.mark.parametrize("method", METHODS + SERVED_BESIDE, ids=_id)
def test_raw_mutated_bytes(daemon, channel, method):
    @FUZZ
    @given(frames=_frames(method, mutated(method.input_type)))
    def run(frames: list[bytes]) -> None:
        check(daemon, channel, method, frames)

    run()
