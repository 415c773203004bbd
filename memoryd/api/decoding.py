"""Request bodies that do not decode: answered INVALID_ARGUMENT after auth, never UNKNOWN.

grpc.aio runs a handler's ``request_deserializer`` before the handler (and, for client
streams, on each frame as the handler reads it). A protobuf ``DecodeError`` raised there
(garbage bytes, invalid UTF-8 in a proto3 string) escapes before any interceptor can
map it: the caller got UNKNOWN naming an internal class, the log a 7-line traceback per
call, and for a Stream frame the whole stream ended INTERNAL.

So :class:`RequestDecodingInterceptor` installs a lenient deserializer that turns a body
it cannot decode into an :class:`Undecodable` marker, and wraps the behaviour so that a
unary request that is a marker is refused with InvalidArgument. It must be the innermost
interceptor (last in the list): an interceptor outside it that denies the call (auth)
answers first, so an unauthenticated client still gets UNAUTHENTICATED. Client-streaming
RPCs named in ``answers_frames`` receive markers as frames, and their servicer answers
each as that frame's error (Stream: the op's ``error``; Import: an entry of ``errors``),
so one bad frame neither ends the stream nor drops the valid ops in flight. Any other
client stream (server reflection) ends INVALID_ARGUMENT at the first bad frame.

Each refusal is logged as a one-line WARNING, at most one per ``LOG_EVERY_SECONDS``
(with a count of those not logged), so a client sending garbage cannot grow the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import grpc

from memoryd.api.interceptors import Behavior, Deserializer, Wrap, WrappingInterceptor
from memoryd.core.errors import InvalidArgument

log = logging.getLogger("memoryd.api")

LOG_EVERY_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A request body (or one client-stream frame) that is not a valid message."""

    type_name: str  # the message it should have been, e.g. memoryd.v1.StoreRequest
    raw: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.raw)

    def leading_string(self) -> str:
        """Field 1 when it is the body's first field and a valid UTF-8 string, else "".

        Serializers write fields in number order, so a StreamRequest whose op does not
        decode (invalid UTF-8 in a Store's text) still names its request_id this way."""
        raw = self.raw
        if not raw or raw[0] != 0x0A:  # field 1, length-delimited
            return ""
        length = shift = 0
        pos = 1
        while pos < len(raw) and pos < 6:
            byte = raw[pos]
            length |= (byte & 0x7F) << shift
            pos += 1
            shift += 7
            if not byte & 0x80:
                break
        else:
            return ""
        if pos + length > len(raw):
            return ""
        try:
            return raw[pos : pos + length].decode("utf-8")
        except UnicodeDecodeError:
            return ""

    @property
    def message(self) -> str:
        return (
            f"the request body ({self.size} bytes) is not a valid {self.type_name}: "
            "malformed protobuf, or a string field that is not valid UTF-8; "
            "send a message serialised from its .proto definition"
        )


class RateLimitedWarning:
    """One WARNING line at most every ``every`` seconds; the lines held back are counted
    and reported with the next one."""

    def __init__(
        self,
        logger: logging.Logger,
        every: float = LOG_EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._log = logger
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._held = 0

    def __call__(self, message: str, *args: object) -> None:
        with self._lock:
            now = self._clock()
            if now - self._last < self._every:
                self._held += 1
                return
            held, self._held, self._last = self._held, 0, now
        suffix = f" (and {held} more like it not logged)" if held else ""
        self._log.warning(message + suffix, *args)


_warn = RateLimitedWarning(log)


def lenient(deserializer: Callable[[bytes], Any] | None, method: str) -> Callable[[bytes], Any]:
    """``deserializer``, returning an :class:`Undecodable` instead of raising."""
    type_name = _input_type_name(deserializer, method)

    def decode(raw: bytes) -> Any:
        if deserializer is None:
            return raw
        try:
            return deserializer(raw)
        except Exception:
            _warn("refused %s: a request body of %d bytes does not decode", method, len(raw))
            return Undecodable(type_name, bytes(raw))

    return decode


def _input_type_name(deserializer: Callable[[bytes], Any] | None, method: str) -> str:
    # Generated stubs pass ``SomeRequest.FromString``: its class names the message.
    owner = getattr(deserializer, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    name = getattr(descriptor, "full_name", None)
    return name if isinstance(name, str) else f"request of {method}"


def refuse_undecodable(request: Any) -> None:
    if isinstance(request, Undecodable):
        raise InvalidArgument(request.message)


async def _refusing(frames: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for frame in frames:
        refuse_undecodable(frame)
        yield frame


def _guard_frames(behavior: Behavior, streaming: bool) -> Behavior:
    async def unary(frames: Any, context: Any) -> Any:
        return await behavior(_refusing(frames), context)

    async def stream(frames: Any, context: Any) -> AsyncIterator[Any]:
        async for response in behavior(_refusing(frames), context):
            yield response

    return stream if streaming else unary


def _as_is(behavior: Behavior, _streaming: bool) -> Behavior:
    return behavior


def _guard(behavior: Behavior, streaming: bool) -> Behavior:
    async def unary(request: Any, context: Any) -> Any:
        refuse_undecodable(request)
        return await behavior(request, context)

    async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
        refuse_undecodable(request)
        async for response in behavior(request, context):
            yield response

    return stream if streaming else unary


class RequestDecodingInterceptor(WrappingInterceptor):
    """Install the lenient deserializer and refuse undecodable unary requests; innermost."""

    def __init__(self, answers_frames: Collection[str] = ()) -> None:
        """``answers_frames``: the client-streaming methods (full paths) whose servicer
        answers an :class:`Undecodable` frame itself."""
        super().__init__()
        self._answers_frames = frozenset(answers_frames)

    def wrapper(self, method: str, handler: grpc.RpcMethodHandler) -> Wrap:
        if not handler.request_streaming:
            return _guard
        if method in self._answers_frames:
            return _as_is
        return _guard_frames

    def deserializer(self, method: str) -> Callable[[Deserializer | None], Deserializer]:
        return lambda d: lenient(d, method)
