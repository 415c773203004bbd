from __future__ import annotations

import logging

import grpc
import pytest

from memoryd.api.errors import MAX_MESSAGE_CHARS, STATUS, status_of, trailers_of
from memoryd.core import errors


def test_every_error_class_has_a_status() -> None:
    assert set(errors.ALL_ERRORS) == set(STATUS)
    members = {
        v
        for v in vars(errors).values()
        if isinstance(v, type)
        and issubclass(v, errors.MemorydError)
        and v is not errors.MemorydError
    }
    assert members == set(STATUS)


def test_domain_errors_keep_their_message() -> None:
    assert status_of(errors.InvalidArgument("text is empty")) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "text is empty",
    )
    assert status_of(errors.NotReady("starting"))[0] == grpc.StatusCode.UNAVAILABLE


def test_unexpected_errors_are_internal_without_leaking(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        code, message = status_of(KeyError("/secret/path/db.lance"))
    assert code == grpc.StatusCode.INTERNAL
    assert "secret" not in message and "KeyError" not in message
    assert "incident" in message
    assert "secret" in caplog.text  # the operator still gets the details


def test_every_status_message_is_capped() -> None:
    code, message = status_of(errors.PermissionDenied("scope " * 10_000))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert len(message) <= MAX_MESSAGE_CHARS and message.endswith("more chars)")


def test_name_few_names_a_few_then_counts_the_rest() -> None:
    assert errors.name_few(["a", "b"]) == "a, b"
    assert errors.name_few([str(i) for i in range(12)], few=3) == "0, 1, 2 and 9 more"


def test_an_overload_tells_the_caller_how_long_to_wait() -> None:
    assert trailers_of(errors.Overloaded("queue full", retry_after=0.25)) == (
        ("retry-after-ms", "250"),
    )
    assert trailers_of(errors.Overloaded("queue full")) == ()
    assert trailers_of(errors.NotFound("no such memory")) == ()
