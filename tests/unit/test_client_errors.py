"""The Python client's exception tree (memoryd_client.errors) against the daemon's."""

from __future__ import annotations

import grpc
import memoryd_client
import pytest
from memoryd_client import errors as client_errors

from memoryd.api.errors import STATUS


def test_every_status_the_daemon_sends_has_a_client_class() -> None:
    for server_class, code in STATUS.items():
        cls = client_errors.ERROR_CLASSES[code]
        assert cls is not client_errors.MemorydError, server_class
        assert cls.__name__ == code.name.title().replace("_", ""), (server_class, cls)


@pytest.mark.parametrize("code", list(client_errors.ERROR_CLASSES))
def test_each_status_raises_its_class_which_old_handlers_still_catch(
    code: grpc.StatusCode,
) -> None:
    error = client_errors.error_for(code, "what went wrong")
    assert type(error) is client_errors.ERROR_CLASSES[code]
    assert isinstance(error, memoryd_client.MemorydError)
    assert (error.code, error.details, error.message) == (
        code,
        "what went wrong",
        "what went wrong",
    )
    assert str(error) == f"{code.name}: what went wrong"
    assert getattr(memoryd_client, type(error).__name__) is type(error)


def test_a_status_memoryd_never_sends_is_the_base_class() -> None:
    error = client_errors.error_for(grpc.StatusCode.ABORTED, "x")
    assert type(error) is client_errors.MemorydError
    assert client_errors.Overloaded is client_errors.ResourceExhausted


def test_retry_after_is_read_from_the_trailer_of_a_refusal_only() -> None:
    told = [("retry-after-ms", "250")]
    assert client_errors.retry_after_of(grpc.StatusCode.RESOURCE_EXHAUSTED, told) == 0.25
    assert client_errors.retry_after_of(grpc.StatusCode.RESOURCE_EXHAUSTED, [("x", "1")]) is None
    assert client_errors.retry_after_of(grpc.StatusCode.UNAVAILABLE, told) is None
    far = [("retry-after-ms", "600000")]
    assert client_errors.retry_after_of(grpc.StatusCode.RESOURCE_EXHAUSTED, far) == 30.0
    junk = [("retry-after-ms", "soon")]
    assert client_errors.retry_after_of(grpc.StatusCode.RESOURCE_EXHAUSTED, junk) is None
