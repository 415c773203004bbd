"""Before the composition root hands a servicer its service (models and index still
loading), every RPC is answered UNAVAILABLE saying the daemon is starting; afterwards the
servicer delegates to what it was given."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from memoryd_client._gen.memoryd.v1 import hooks_pb2 as hooks_pb
from memoryd_client._gen.memoryd.v1 import memory_pb2 as pb
from memoryd_client._gen.memoryd.v1 import review_pb2 as review_pb

from memoryd.api.errors import status_of
from memoryd.api.servicer import HookServicer, MemoryServicer, ReviewServicer
from memoryd.core.errors import NotReady


@pytest.mark.parametrize(
    ("servicer", "call", "request_"),
    [
        (MemoryServicer, "Get", pb.GetRequest(agent_id="a", id="x")),
        (HookServicer, "BuildContext", hooks_pb.BuildContextRequest(agent_id="a", prompt="hi")),
        (ReviewServicer, "Prepare", review_pb.PrepareReviewRequest(agent_id="a")),
    ],
)
async def test_a_servicer_not_yet_given_its_service_answers_that_memoryd_is_starting(
    servicer: type[Any], call: str, request_: Any
) -> None:
    with pytest.raises(NotReady) as caught:
        await getattr(servicer(), call)(request_, None)
    code, message = status_of(caught.value)
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "memoryd is starting" in message and "retry" in message


@pytest.mark.parametrize(
    ("servicer", "attribute"),
    [(MemoryServicer, "service"), (HookServicer, "hooks"), (ReviewServicer, "review")],
)
def test_once_set_a_servicer_delegates_to_the_service_it_was_given(
    servicer: type[Any], attribute: str
) -> None:
    s = servicer()
    given = object()
    s.set_service(given)
    assert getattr(s, attribute) is given
