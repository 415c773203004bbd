from __future__ import annotations

import pytest

from memoryd.core.errors import InvalidArgument, PermissionDenied
from memoryd.core.policy import AccessPolicy, AgentAccess, validate_scope


def test_default_policy_reads_own_and_global_writes_own() -> None:
    a = AccessPolicy().access("main")
    assert a.read == {"agent:main", "global"}
    assert a.write == {"agent:main"}
    a.check_write("agent:main")
    with pytest.raises(PermissionDenied, match="may not write scope 'global'"):
        a.check_write("global")


def test_override_and_explicit_empty_list_denies_all() -> None:
    p = AccessPolicy(agents={"ro": AgentAccess(write=()), "none": AgentAccess(read=(), write=())})
    assert p.access("ro").read == {"agent:ro", "global"}
    assert p.access("ro").write == frozenset()
    assert p.access("none").read == frozenset()
    with pytest.raises(PermissionDenied):
        p.access("none").readable(["global"])


def test_requested_scopes_must_all_be_readable() -> None:
    a = AccessPolicy().access("main")
    assert a.readable([]) == {"agent:main", "global"}
    assert a.readable(["global"]) == {"global"}
    with pytest.raises(PermissionDenied, match="agent:other"):
        a.readable(["global", "agent:other"])


@pytest.mark.parametrize(
    "scope",
    ["", "has space", "x" * 101, "agent:", "agent:bad/id", "a*b", "workspace:x\n", "agent:a\n"],
)
def test_malformed_scopes_are_invalid(scope: str) -> None:
    with pytest.raises(InvalidArgument, match="scope"):
        validate_scope(scope)


@pytest.mark.parametrize(
    "scope", ["global", "agent:main", "workspace:team-1", "project:x.y", "user:u_1"]
)
def test_wellformed_scopes_pass(scope: str) -> None:
    assert validate_scope(scope) == scope


def test_malformed_policy_pattern_fails_at_construction() -> None:
    with pytest.raises(InvalidArgument):
        AccessPolicy(default_read=("not a scope",))


@pytest.mark.parametrize("agent_id", ["main\n", "main\r\n", "ma\nin"])
def test_an_agent_id_with_a_trailing_newline_is_invalid(agent_id: str) -> None:
    """``$`` matches before a final newline: "main\n" would be another agent (and scope
    "agent:main\n" another scope) that a key's pattern ``main*`` covers, and a vault
    note's name with a line break in it."""
    from memoryd.core.policy import validate_agent_id

    with pytest.raises(InvalidArgument, match="agent_id"):
        validate_agent_id(agent_id)
    with pytest.raises(InvalidArgument):
        AccessPolicy().access(agent_id)
