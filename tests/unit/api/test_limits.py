"""Per-principal token buckets: refusals say when to retry, and one credential's
exhaustion never touches another's."""

from __future__ import annotations

import pytest

from memoryd.api.limits import RateLimiter, TokenBucket
from memoryd.core.errors import Overloaded
from memoryd.core.principals import RateLimits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=4.0, clock=clock)
    assert [bucket.take(1) for _ in range(4)] == [0.0] * 4
    assert bucket.take(1) == pytest.approx(0.5)  # one token comes back in half a second
    clock.now += 0.5
    assert bucket.take(1) == 0.0
    clock.now += 100
    assert [bucket.take(1) for _ in range(4)] == [0.0] * 4  # never more than the burst
    assert bucket.take(1) > 0


def test_a_refused_call_says_how_long_to_wait_and_others_are_untouched() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimits(requests_per_second=1.0, request_burst=2.0), clock)
    limiter.check("gw-a", 10)
    limiter.check("gw-a", 10)
    with pytest.raises(Overloaded) as caught:
        limiter.check("gw-a", 10)
    assert caught.value.retry_after == pytest.approx(1.0)
    assert "gw-a" in str(caught.value) and "requests_per_second" in str(caught.value)
    limiter.check("gw-b", 10)  # another credential has its own bucket
    clock.now += 1.0
    limiter.check("gw-a", 10)


def test_bytes_are_limited_too_but_one_large_request_may_pass_alone() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimits(bytes_per_second=1000.0, bytes_burst=2000.0), clock)
    limiter.check("gw", 50_000)  # larger than the burst: passes on a full bucket
    with pytest.raises(Overloaded) as caught:
        limiter.check("gw", 100)
    assert caught.value.retry_after is not None and caught.value.retry_after > 0
