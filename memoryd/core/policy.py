"""Scopes and the access policy: which scopes an agent may read and write.

A scope names a namespace of memories: ``agent:<id>`` (private to one agent, the default
for writes), ``workspace:<id>`` (shared by a workspace's agents), ``global``, and custom
ones such as ``project:<x>`` or ``user:<x>``. The policy turns an agent id into the set of
scopes it may read and the set it may write; storage applies that set as a predicate
before ranking, on every path. Patterns may use ``{agent_id}``; an explicit empty list
denies everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from memoryd.core.errors import InvalidArgument, PermissionDenied, name_few

SCOPE_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}\Z")  # \Z: "$" allows a final "\n"
AGENT_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


def validate_agent_id(agent_id: str) -> str:
    if not agent_id:
        raise InvalidArgument("agent_id is required")
    if not AGENT_ID_RE.match(agent_id):
        raise InvalidArgument(
            f"agent_id {agent_id[:80]!r} is invalid: use 1-64 characters of A-Z a-z 0-9 . _ -"
        )
    return agent_id


def validate_scope(scope: str) -> str:
    if not SCOPE_RE.match(scope):
        raise InvalidArgument(
            f"scope {scope[:120]!r} is invalid: use 1-100 characters of A-Z a-z 0-9 . _ : -"
        )
    if scope.startswith("agent:") and not AGENT_ID_RE.match(scope[len("agent:") :]):
        raise InvalidArgument(f"scope {scope!r} is invalid: agent:<id> needs a valid agent id")
    return scope


def agent_scope(agent_id: str) -> str:
    return f"agent:{agent_id}"


@dataclass(frozen=True, slots=True)
class AgentAccess:
    read: tuple[str, ...] | None = None  # None = the policy's default
    write: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Access:
    """What one agent may do: resolved scope sets."""

    agent_id: str
    read: frozenset[str]
    write: frozenset[str]

    def readable(self, requested: Iterable[str] = ()) -> frozenset[str]:
        """The scopes a read covers: ``requested`` (validated, all readable) or all readable."""
        wanted = frozenset(validate_scope(s) for s in requested)
        if not wanted:
            return self.read
        denied = sorted(wanted - self.read)
        if denied:
            raise PermissionDenied(
                f"agent {self.agent_id!r} may not read scope(s) {name_few(denied)}"
            )
        return wanted

    def check_write(self, scope: str) -> None:
        if scope not in self.write:
            raise PermissionDenied(f"agent {self.agent_id!r} may not write scope {scope!r}")


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    default_read: tuple[str, ...] = ("agent:{agent_id}", "global")
    default_write: tuple[str, ...] = ("agent:{agent_id}",)
    agents: Mapping[str, AgentAccess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Fail at start, not on a user's request, when a pattern is malformed.
        patterns = [*self.default_read, *self.default_write]
        for a in self.agents.values():
            patterns += [*(a.read or ()), *(a.write or ())]
        for p in patterns:
            validate_scope(p.replace("{agent_id}", "x"))

    def access(self, agent_id: str) -> Access:
        validate_agent_id(agent_id)
        override = self.agents.get(agent_id, AgentAccess())
        read = override.read if override.read is not None else self.default_read
        write = override.write if override.write is not None else self.default_write
        return Access(
            agent_id=agent_id,
            read=frozenset(p.replace("{agent_id}", agent_id) for p in read),
            write=frozenset(p.replace("{agent_id}", agent_id) for p in write),
        )
