"""Spans for the stages of a call: ``with tracing.span("embed"):``.

The daemon's RPC span (``api.tracing``) is the parent of the stage spans opened while it
serves the call: ``embed`` (with ``memoryd.cache_hit`` for a query), ``candidates``,
``fuse_rerank``, ``mmr``, ``commit`` (the LanceDB write a Store waits for) and ``follow``
(applying other daemons' writes; outside any RPC it is a root span). A stage names what
it does, never what it works on: no memory text, query, agent id or secret goes into a
span or its attributes.

A storage job outside any RPC (following the shared table) opens its own root span the
same way: ``with tracing.span("follow", versions=n, rows=rows): ...``.

With tracing off (``[tracing] exporter = "none"``, the default) no tracer is installed
and ``span`` returns one shared do-nothing context manager: no OpenTelemetry object is
made on the hot path. ``install`` is called by the composition root only (one tracer per
process, as OpenTelemetry has one provider per process).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from opentelemetry import trace

AttributeValue = str | bool | int | float

_tracer: trace.Tracer | None = None


def install(tracer: trace.Tracer | None) -> None:
    """Open stage spans with ``tracer`` from now on (None: tracing off)."""
    global _tracer
    _tracer = tracer


def installed() -> trace.Tracer | None:
    return _tracer


class _NoSpan(AbstractContextManager["_NoSpan"]):
    """What ``span`` gives with tracing off: enters, exits, ignores attributes."""

    __slots__ = ()

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        pass


NO_SPAN = _NoSpan()


def span(stage: str, **attributes: AttributeValue) -> AbstractContextManager[Any]:
    """A child span of the current one named ``memoryd.<stage>``, its attributes prefixed
    ``memoryd.``; the shared ``NO_SPAN`` when tracing is off. The value entered has
    ``set_attribute``. An exception ends the span with status ERROR and its type only (its
    message may quote a caller's input)."""
    tracer = _tracer
    if tracer is None:
        return NO_SPAN
    return _Stage(tracer, stage, attributes)


def note(key: str, value: AttributeValue) -> None:
    """Set ``memoryd.<key>`` on the current span (nothing when tracing is off)."""
    if _tracer is None:
        return
    trace.get_current_span().set_attribute(f"memoryd.{key}", value)


class _Stage(AbstractContextManager[Any]):
    __slots__ = ("_attributes", "_cm", "_name", "_tracer")

    def __init__(self, tracer: trace.Tracer, stage: str, attributes: dict[str, AttributeValue]):
        self._tracer = tracer
        self._name = f"memoryd.{stage}"
        self._attributes = {f"memoryd.{k}": v for k, v in attributes.items()}
        self._cm: AbstractContextManager[trace.Span] | None = None

    def __enter__(self) -> trace.Span:
        self._cm = self._tracer.start_as_current_span(
            self._name,
            attributes=self._attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        return self._cm.__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._cm is not None
        if exc_type is not None:
            current = trace.get_current_span()
            current.set_attribute("error.type", exc_type.__name__)
            current.set_status(trace.Status(trace.StatusCode.ERROR))
        self._cm.__exit__(exc_type, exc, tb)
