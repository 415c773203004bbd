"""The gRPC surface around the API: health, reflection, unknown methods, and that
unexpected failures never leak internals."""

from __future__ import annotations

import base64
import json

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from memoryd_client import MemorydError

pytestmark = pytest.mark.integration

SERVICE = "memoryd.v1.MemoryService"


@pytest.mark.parametrize(
    "service",
    [
        "",
        SERVICE,
        "memoryd.v1.HookService",
        "memoryd.v1.ReviewService",
        "memoryd.storage",
        "memoryd.follow",  # a local directory: nothing to follow, always SERVING
    ],
)
def test_health_is_serving_once_ready(channel, service):
    health = health_pb2_grpc.HealthStub(channel)
    r = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
    assert r.status == health_pb2.HealthCheckResponse.SERVING


def test_health_watch_streams_the_status(channel):
    """grpc's health service writes Watch's answers with ``context.write`` (a coroutine,
    not a generator of responses), and each interceptor iterated the responses: every
    Watch (what gRPC clients' own health checking and some load balancers call) failed
    with INTERNAL."""
    health = health_pb2_grpc.HealthStub(channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE), timeout=10)
    try:
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        watch.cancel()


def test_health_of_an_unknown_service_is_not_found(channel):
    health = health_pb2_grpc.HealthStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_reflection_lists_and_describes_the_memory_service(channel):
    db = ProtoReflectionDescriptorDatabase(channel)
    services = db.get_services()
    assert SERVICE in services
    assert "grpc.health.v1.Health" in services
    service = descriptor_pool.DescriptorPool(db).FindServiceByName(SERVICE)
    methods = {m.name: m for m in service.methods}
    contract = {"Store", "Recall", "Forget", "Update", "Get", "List", "Stats", "Stream"}
    assert set(methods) == contract | {"ListConflicts", "Export", "Import"}
    assert "memoryd.v1.HookService" in services
    review = descriptor_pool.DescriptorPool(db).FindServiceByName("memoryd.v1.ReviewService")
    assert {m.name for m in review.methods} == {"Prepare", "Apply"}
    assert methods["Stream"].client_streaming and methods["Stream"].server_streaming
    assert methods["Store"].input_type.full_name == "memoryd.v1.StoreRequest"
    assert "idempotency_key" in methods["Store"].input_type.fields_by_name


def test_unknown_method_is_unimplemented(channel):
    call = channel.unary_unary(f"/{SERVICE}/Teleport")
    with pytest.raises(grpc.RpcError) as caught:
        call(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_unexpected_errors_do_not_leak_internals(client, new_agent):
    """A forged page token drives List down a path nobody planned for. Whatever the daemon
    answers, the caller must not see a traceback, exception type or source path."""
    forged = base64.urlsafe_b64encode(json.dumps([1e400, "x"]).encode()).decode()
    with pytest.raises(MemorydError) as caught:
        client.list(new_agent(), page_token=forged)
    error = caught.value
    for leak in ("Traceback", "OverflowError", "Exception", ".py", 'File "', "1e400"):
        assert leak not in error.message, error.message
    if error.code == grpc.StatusCode.INTERNAL:
        assert "internal error" in error.message
        assert "incident" in error.message
    else:
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    # The daemon is still fine afterwards.
    assert client.stats(new_agent()).total == 0
