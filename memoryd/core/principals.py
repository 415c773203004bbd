"""Who is calling: principals, the agents each may act for, and the operator role.

A principal is what a credential maps to: the single ``MEMORYD_AUTH_TOKEN``, one API key
of the keys file, or a client certificate's identity (mTLS). It may act for a set of
agents, named exactly or by ``*``/``?`` patterns (``tenant-a-*``), and may hold the
operator role (daemon-wide Export and Stats). The access policy (``core.policy``) then
decides which scopes each of those agents may read and write; a principal never widens it.

The gRPC edge resolves the principal of each call and sets :data:`CURRENT`; every service
operation checks it through :meth:`Principal.check_agent` before anything else, so a
request for an agent outside the principal's set is refused the same way whether or not
that agent has memories. With auth off the daemon serves only loopback callers (unless
``--insecure``), all trusted: :data:`LOCAL` acts for every agent and is an operator.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

from memoryd.core.errors import PermissionDenied

AGENT_PATTERN_RE = re.compile(r"^[A-Za-z0-9._*?-]{1,64}\Z")


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    agents: tuple[str, ...] = ("*",)  # exact agent ids or fnmatch patterns
    operator: bool = False
    # May approve, in a review Apply, moving an agent's memory into a shared or global scope
    # (an operator may too). An agent's own gateway key is not a reviewer, so an agent
    # cannot approve its own words into a scope others read.
    reviewer: bool = False

    @property
    def may_review(self) -> bool:
        return self.operator or self.reviewer

    def may_act_for(self, agent_id: str) -> bool:
        return any(
            p == agent_id or (("*" in p or "?" in p) and fnmatch.fnmatchcase(agent_id, p))
            for p in self.agents
        )

    def check_agent(self, agent_id: str) -> None:
        if not self.may_act_for(agent_id):
            # Said the same way whether or not the agent exists or has memories.
            raise PermissionDenied(f"credential {self.name!r} may not act for agent {agent_id!r}")

    def check_operator(self, what: str) -> None:
        if not self.operator:
            raise PermissionDenied(f"{what} needs an operator credential ({self.name!r} is not)")


LOCAL = Principal("local", ("*",), operator=True)
# What a call that no credential authenticated acts as (until it is refused): nobody, and
# not LOCAL, so that the access log never names an unauthenticated call "local".
NOBODY = Principal("-", (), operator=False)


@dataclass(frozen=True, slots=True)
class RateLimits:
    requests_per_second: float = 0.0  # 0 = unlimited
    request_burst: float = 0.0  # 0 = twice the rate (at least 1)
    bytes_per_second: float = 0.0
    bytes_burst: float = 0.0  # 0 = twice the rate (at least 1 MiB)

    @property
    def enabled(self) -> bool:
        return self.requests_per_second > 0 or self.bytes_per_second > 0


# The principal of the call being served (set by the gRPC edge for each RPC; tasks a call
# starts, such as Stream ops, inherit it). In-process callers get LOCAL.
CURRENT: ContextVar[Principal] = ContextVar("memoryd_principal", default=LOCAL)


# Whose share of the shared queues (the embedder's) the call's work counts against: the
# principal, or with the trusted local caller (auth off) the agent. Set by the service.
TENANT: ContextVar[str] = ContextVar("memoryd_tenant", default="")


# time.monotonic() by which the caller wants its answer (None: no deadline); set by the
# gRPC edge, read by queues so that work nobody waits for any more is dropped, not done.
DEADLINE: ContextVar[float | None] = ContextVar("memoryd_deadline", default=None)


# A call that streams requests (Stream, Import) and may outlive a reload of the keys: what
# resolves its credential again if the keys changed since (sets CURRENT, or raises
# Unauthenticated for a key revoked). Set by the gRPC edge (AuthInterceptor).
RECHECK: ContextVar[Callable[[], None] | None] = ContextVar("memoryd_recheck", default=None)


def current() -> Principal:
    return CURRENT.get()


def recheck() -> None:
    """Just before a streamed request's op runs: the call's credential as the keys in
    force now say (it was checked when the request was read; the request may have waited
    since, paced by the rate limits or for a free slot, while the keys were reloaded)."""
    again = RECHECK.get()
    if again is not None:
        again()


def sharing() -> str:
    """Whose share of the daemon's caches of computed answers (the query embeddings) the
    call uses: the credential's, so that one tenant never gets another's answer sooner
    than it would compute its own (a timing that told it what the other asked); "" for
    the trusted local caller of a daemon without auth, whose callers all share one. (The
    whole principal, not its name alone: a key of the keys file named like the shared
    token's principal does not share the token's.)"""
    p = CURRENT.get()
    return "" if p is LOCAL else repr(p)


def set_tenant(agent_id: str) -> None:
    p = CURRENT.get()
    TENANT.set(f"agent:{agent_id}" if p is LOCAL else p.name)
