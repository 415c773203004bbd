"""``memoryd ctl``: the operator's command line to a running daemon, on the Python client.

Every verb is a function ``(client, args) -> exit code`` in the ``VERBS`` table; every
verb takes ``--json`` (every field of the response, numbers as numbers). Failures are one
line on stderr saying what to fix, never a traceback, and the exit code says what kind:

    0  done
    1  the daemon refused the request (its status code and message are printed)
    2  the command line is wrong (argparse's own code too)
    3  no daemon answers at the address, or it is still starting
    4  a local file cannot be read
    5  nothing matched: a forget or delete-bulk deleted nothing
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from memoryd.core.records import CATEGORY_LABELS, Category

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_FILE, EXIT_NOTHING = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130

TTLS = {"permanent": 1, "session": 2, "short": 3}
DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_IMPORTANCE = 0.7  # store.default_importance; given to import rows that name none


class CtlError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def category_number(label: str) -> int:
    return Category.from_label(label).value


# -- output ---------------------------------------------------------------------------


def message_dict(m: Any) -> dict[str, Any]:
    """Every field of a protobuf message (proto names; zero and empty values included;
    64-bit numbers as numbers, enums by name, timestamps as RFC 3339, unset messages and
    the unset members of a oneof left out)."""
    out: dict[str, Any] = {}
    for f in m.DESCRIPTOR.fields:
        oneof = f.containing_oneof
        if oneof is not None and m.WhichOneof(oneof.name) != f.name:
            continue
        value = getattr(m, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = {k: _value(vf, v) for k, v in sorted(value.items())}
        elif f.is_repeated:
            out[f.name] = [_value(f, v) for v in value]
        elif f.message_type is not None and not m.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _value(f, value)
    return out


def _value(f: Any, v: Any) -> Any:
    if f.message_type is not None:
        if f.message_type.full_name == "google.protobuf.Timestamp":
            return v.ToJsonString()
        return message_dict(v)
    if f.enum_type is not None:
        known = f.enum_type.values_by_number.get(v)
        return known.name if known is not None else v
    if f.type == f.TYPE_FLOAT:
        return _shortest_float32(v)
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return v


def _shortest_float32(v: float) -> float:
    """A ``float`` field as the shortest decimal that is the same float32: the 0.7 that was
    stored prints as 0.7, not as its float64 widening 0.699999988079071."""
    for digits in range(6, 10):
        short = float(f"{v:.{digits}g}")
        if struct.unpack("f", struct.pack("f", short))[0] == v:
            return short
    return v


def emit(args: argparse.Namespace, message: Any, human: str) -> None:
    if args.json:
        print(json.dumps(message_dict(message), ensure_ascii=False))
    else:
        print(human)


def line(m: Any, score: float | None = None) -> str:
    head = f"{m.id}  [{m.scope}]"
    if m.language:
        head += f"  ({m.language})"
    if score is not None:
        head += f"  score={score:.3f}"
    return f"{head}\n    {m.text}"


# -- verbs ----------------------------------------------------------------------------


def _store(c: Any, args: argparse.Namespace) -> int:
    from memoryd_client import pb

    r = c.store(
        args.agent,
        args.text,
        scope=args.scope or "",
        category=category_number(args.category) if args.category else 0,
        importance=args.importance,
        metadata=dict(args.metadata or ()),
        ttl=TTLS[args.ttl] if args.ttl else 0,
    )
    outcome = pb.StoreOutcome.Name(r.outcome).removeprefix("STORE_OUTCOME_").lower()
    human = f"{outcome}: {r.memory.id}"
    if r.duplicate_of:
        human += f" (an existing memory, score {r.duplicate_score:.2f}: {r.memory.text})"
    emit(args, r, human)
    return EXIT_OK


def _recall(c: Any, args: argparse.Namespace) -> int:
    r = c.recall(
        args.agent,
        args.query,
        limit=args.limit,
        min_score=args.min_score,
        explain=args.explain,
        created_after=args.after,
        created_before=args.before,
        reference_time=args.reference_time,
        timezone=args.timezone or "",
        ignore_time_expressions=args.no_time_expressions,
    )
    lines = [line(h.memory, h.score) for h in r.results] or ["(no memories)"]
    if args.explain and r.results:
        lines.insert(0, _query_explain(r.results[0].explain))
    emit(args, r, "\n".join(lines))
    return EXIT_OK


def _query_explain(e: Any) -> str:
    out = f"query language: {e.query_language}  dense trust: {e.dense_trust:.2f}"
    if e.time_expression:
        start = e.time_window_start.ToDatetime(tzinfo=UTC).isoformat()
        end = e.time_window_end.ToDatetime(tzinfo=UTC).isoformat()
        out += f"\ntime: {e.time_expression!r} -> [{start}, {end})"
    return out


def _forget(c: Any, args: argparse.Namespace) -> int:
    if args.query is not None and not args.query.strip():
        raise CtlError("forget --query needs the words of the memory to forget", EXIT_USAGE)
    r = c.forget(args.agent, id=args.id or "", query=args.query or "")
    if r.deleted_ids:
        emit(args, r, "deleted: " + ", ".join(r.deleted_ids))
        return EXIT_OK
    if r.candidates:
        human = "\n".join(
            ["nothing deleted: no single strong match; the nearest memories are below.",
             "forget one with --id ID, or say more of its words:"]
            + [line(h.memory, h.score) for h in r.candidates]
        )  # fmt: skip
    else:
        human = "nothing deleted: no memory of this agent matches"
    emit(args, r, human)
    if not args.json:
        print("memoryd ctl: nothing deleted", file=sys.stderr)
    return EXIT_NOTHING


def _get(c: Any, args: argparse.Namespace) -> int:
    m = c.get(args.agent, args.id)
    emit(args, m, line(m))
    return EXIT_OK


def _list(c: Any, args: argparse.Namespace) -> int:
    r = c.list(
        args.agent,
        page_size=args.page_size,
        page_token=args.page_token or "",
        scopes=args.scope or (),
        categories=[category_number(x) for x in args.category or ()],
        oldest_first=args.oldest_first,
    )
    lines = [line(m) for m in r.memories] or ["(no memories)"]
    if r.next_page_token:
        lines.append(f"next page: --page-token {r.next_page_token}")
    emit(args, r, "\n".join(lines))
    return EXIT_OK


def _stats(c: Any, args: argparse.Namespace) -> int:
    s = c.stats(args.agent, daemon_wide=args.daemon_wide)
    human = "\n".join(
        [f"memories visible to {args.agent}: {s.total}"]
        + [f"  {k}: {v}" for k, v in sorted(s.by_scope.items())]
        + [f"model: {s.embedding_model} ({s.embedding_dim}-d), version {s.version}"]
        + [
            f"store: {s.store_rows} row{'' if s.store_rows == 1 else 's'}, "
            f"index {s.index_bytes} bytes"
            + (" (the whole daemon)" if args.daemon_wide else f" (the scopes {args.agent} reads)")
        ]
        + [_follow_line(s)]
    )
    emit(args, s, human)
    return EXIT_OK


def _follow_line(s: Any) -> str:
    """Several daemons over one store: how far this one's index trails the others'."""
    if s.follow_seconds_since_check < 0:
        return "follow: off (this daemon is its store's only writer)"
    behind = s.follow_latest_version - s.follow_applied_version
    return (
        f"follow: table version {s.follow_applied_version} applied of "
        f"{s.follow_latest_version} seen ({behind} behind), last look "
        f"{s.follow_seconds_since_check:.2f}s ago"
    )


def _conflicts(c: Any, args: argparse.Namespace) -> int:
    r = c.conflicts(args.agent, limit=args.limit)
    lines = [
        f"{x.new_agent_id} vs {x.existing_agent_id} ({x.score:.2f}, {x.merge_decision})"
        f"\n    new:      {x.new_text}\n    existing: {x.existing_text}"
        for x in r.conflicts
    ] or ["(no conflicts)"]
    emit(args, r, "\n".join(lines))
    return EXIT_OK


def _export(c: Any, args: argparse.Namespace) -> int:
    count = 0
    for m in c.export(args.agent, scopes=args.scope or (), all_scopes=args.all_scopes):
        print(json.dumps(message_dict(m), ensure_ascii=False))
        count += 1
    print(f"exported {count} memories", file=sys.stderr)
    return EXIT_OK


def _import(c: Any, args: argparse.Namespace) -> int:
    path = args.file
    try:
        source = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        raise CtlError(f"cannot read {path}: {e.strerror}", EXIT_FILE) from None
    sent = 0
    bad: CtlError | None = None
    progress = _Progress("sent", enabled=sys.stderr.isatty())

    def rows() -> Iterator[Any]:
        # Runs on grpc's sending thread: a bad row ends the stream here and is said after.
        nonlocal sent, bad
        for number, text in enumerate(source, start=1):
            if not text.strip():
                continue
            try:
                row = _import_row(text, number, path, args.into_scope)
            except CtlError as e:
                bad = e
                return
            yield row
            sent += 1
            progress.tick(sent)

    try:
        with source:
            r = c.import_memories(args.agent, rows(), timeout=None)
    except KeyboardInterrupt:
        progress.done()
        print(
            f"memoryd ctl: import interrupted after sending {sent} rows; the rows the daemon "
            "received are kept, and importing the same file again skips them",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    progress.done()
    human = f"imported {r.imported}, skipped {r.skipped_existing} existing"
    if r.errors:
        human += f", refused {len(r.errors)}:" + "".join(
            f"\n  {msg}" for msg in summarise(f"{e.code_name}: {e.message}" for e in r.errors)
        )
        if not args.into_scope and any("may not write scope" in e.message for e in r.errors):
            human += (
                f"\n(rows of another agent's scope: --into-scope agent:{args.agent} "
                "takes them into this agent's own)"
            )
    emit(args, r, human)
    if bad is not None:
        raise CtlError(f"{bad}; the import stopped there ({sent} rows before it sent)", bad.code)
    return EXIT_REFUSED if r.errors else EXIT_OK


def _import_row(text: str, number: int, path: str, into_scope: str | None) -> Any:
    from google.protobuf.json_format import ParseDict, ParseError
    from memoryd_client import pb

    where = f"{'stdin' if path == '-' else path} line {number}"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise CtlError(f"{where}: not JSON ({e.msg} at column {e.colno})", EXIT_USAGE) from None
    if not isinstance(raw, dict):
        raise CtlError(f"{where}: a row must be a JSON object with at least 'text'", EXIT_USAGE)
    if "importance" not in raw:
        raw["importance"] = DEFAULT_IMPORTANCE
    try:
        m = ParseDict(raw, pb.Memory(), ignore_unknown_fields=True)
    except ParseError as e:
        raise CtlError(f"{where}: {e}", EXIT_USAGE) from None
    if into_scope:
        m.scope = into_scope
        m.ClearField("related_ids")
        m.supersedes = m.superseded_by = ""
    return m


def summarise(messages: Any, shown: int = 5) -> list[str]:
    """The distinct messages (ids masked), each once with its count, the first few only."""
    import re

    counts: Counter[str] = Counter(
        re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", m)
        for m in messages
    )
    out = [f"{m} (x{n})" if n > 1 else m for m, n in counts.most_common(shown)]
    if len(counts) > shown:
        out.append(f"... and {len(counts) - shown} other kinds of error")
    return out


class _Progress:
    """A count on one terminal line, at most ten times a second."""

    def __init__(self, what: str, *, enabled: bool):
        self.what, self.enabled, self._last, self._shown = what, enabled, 0.0, False

    def tick(self, n: int) -> None:
        now = time.monotonic()
        if self.enabled and now - self._last >= 0.1:
            print(f"\r{self.what} {n} rows", end="", file=sys.stderr, flush=True)
            self._last, self._shown = now, True

    def done(self) -> None:
        if self._shown:
            print(file=sys.stderr)


def _delete_bulk(c: Any, args: argparse.Namespace) -> int:
    """Forget every memory matching the filters (by id, one at a time); --dry-run lists."""
    cutoff = (
        datetime.now(UTC) - timedelta(days=args.older_than_days)
        if args.older_than_days is not None
        else None
    )
    matches = [
        m
        for m in c.list_all(
            args.agent,
            scopes=args.scope or (),
            categories=[category_number(x) for x in args.category or ()],
        )
        if cutoff is None or m.created_at.ToDatetime(tzinfo=UTC) < cutoff
    ]
    if matches and not args.dry_run and not args.yes:
        if not sys.stdin.isatty():
            raise CtlError(
                f"delete-bulk would delete {len(matches)} memories of {args.agent}: pass --yes "
                "to do it (or --dry-run to list them)",
                EXIT_USAGE,
            )
        answer = input(f"delete {len(matches)} memories of {args.agent}? [y/N] ")
        if answer.strip().lower() not in {"y", "yes"}:
            print("nothing deleted", file=sys.stderr)
            return EXIT_NOTHING
    deleted: list[str] = []
    if not args.dry_run:
        for m in matches:
            deleted.extend(c.forget(args.agent, id=m.id).deleted_ids)
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "matched": [m.id for m in matches],
                          "deleted": deleted}))  # fmt: skip
    else:
        verb = "would delete" if args.dry_run else "deleted"
        print(f"{verb} {len(matches) if args.dry_run else len(deleted)} memories")
        for m in matches:
            print(line(m))
    return EXIT_OK if matches else EXIT_NOTHING


def _doctor(c: Any, args: argparse.Namespace) -> int:
    """Checks a running daemon: reachable, healthy, model and store, a read round trip."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from memoryd_client import tls_credentials

    checks: list[tuple[str, bool, str]] = []
    channel = (  # the same transport as the verbs' client: TLS when ctl was given its files
        grpc.secure_channel(
            args.address, tls_credentials(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key)
        )
        if args.tls_ca or args.tls_cert or args.tls_key
        else grpc.insecure_channel(args.address)
    )
    try:
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=args.timeout
        )
        serving = status.status == health_pb2.HealthCheckResponse.SERVING
        name = health_pb2.HealthCheckResponse.ServingStatus.Name(status.status)
        checks.append(("health", serving, name))
    except grpc.RpcError as e:
        checks.append(("health", False, f"{e.code().name}: {e.details()}"))
    finally:
        channel.close()
    try:
        s = c.stats(args.agent)
        checks.append(("model", s.embedding_dim > 0, f"{s.embedding_model} ({s.embedding_dim}-d)"))
        checks.append((
            "store", True,
            f"{s.total} {'memory' if s.total == 1 else 'memories'} visible to {args.agent}, "
            f"index {s.index_bytes} bytes "
            f"(storage {s.storage_status or 'ok'})",
        ))  # fmt: skip
        checks.append(("version", True, s.version))
        hits = c.recall(args.agent, "memoryd doctor probe", limit=1)
        n = len(hits.results)
        checks.append(("recall", True, f"answered ({n} result{'' if n == 1 else 's'})"))
    except Exception as e:
        checks.append(("api", False, str(e)))
    ok = all(passed for _, passed, _ in checks)
    if args.json:
        print(json.dumps({"ok": ok, "checks": [
            {"check": n, "ok": p, "detail": d} for n, p, d in checks
        ]}))  # fmt: skip
    else:
        for name, passed, detail in checks:
            print(f"{'ok  ' if passed else 'FAIL'} {name}: {detail}")
    return EXIT_OK if ok else EXIT_REFUSED


Verb = Callable[[Any, argparse.Namespace], int]
VERBS: dict[str, Verb] = {
    "store": _store,
    "recall": _recall,
    "forget": _forget,
    "get": _get,
    "list": _list,
    "stats": _stats,
    "conflicts": _conflicts,
    "export": _export,
    "import": _import,
    "delete-bulk": _delete_bulk,
    "doctor": _doctor,
}
ALIASES = {"search": "recall", "delete": "forget"}


# -- the command line -------------------------------------------------------------------


def _count(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {value}")
        return value

    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _when(text: str) -> datetime:
    """An ISO 8601 date or time (a date, or a time without a zone, is taken as UTC)."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date or time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


class _OneLineErrors(argparse.ArgumentParser):
    """A verb's bad command line is one line on stderr, like every other ctl error: what
    is wrong, and where its options are listed (not argparse's usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default only when it has one worth saying (not None or off)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, False, argparse.SUPPRESS) or "default" in (action.help or ""):
            return action.help or ""
        return super()._get_help_string(action) or ""


def _add_filters(v: argparse.ArgumentParser) -> None:
    """``--scope`` and ``--category`` (each repeatable), as list and delete-bulk take them."""
    v.add_argument("--scope", action="append", help="only this scope (repeatable)")
    v.add_argument(
        "--category",
        action="append",
        choices=CATEGORY_LABELS,
        help="only this category (repeatable)",
    )


def add_parser(sub: Any) -> Any:
    """The ``ctl`` verb and its verbs, on the top-level parser's subparsers; returns the
    verbs' subparsers (for verbs that run without a daemon, like ``reembed``)."""
    c = sub.add_parser(
        "ctl",
        help="talk to a running daemon",
        description="Talk to a running memoryd. The key for a daemon with auth comes from "
        "MEMORYD_AUTH_TOKEN. Exit codes: 0 done, 1 refused by the daemon, 2 bad command "
        "line, 3 no daemon answering, 4 unreadable file, 5 nothing matched, 130 interrupted.",
        formatter_class=_Help,
    )
    c.add_argument(
        "--address",
        default=os.environ.get("MEMORYD_ADDRESS", DEFAULT_ADDRESS),
        help="the daemon's HOST:PORT (environment: MEMORYD_ADDRESS)",
    )
    c.add_argument("--timeout", type=float, default=10.0, help="seconds per call")
    c.add_argument("--json", action="store_true", help="print the response as JSON")
    c.add_argument("--tls-ca", type=Path, help="PEM of the CA that signed the daemon's cert (TLS)")
    c.add_argument("--tls-cert", type=Path, help="client certificate PEM (mTLS)")
    c.add_argument("--tls-key", type=Path, help="client private key PEM (mTLS)")
    c.set_defaults(func=run)
    common = argparse.ArgumentParser(add_help=False)  # --json after the verb works too
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the answer as JSON"
    )
    fmt = _Help
    verbs = c.add_subparsers(
        dest="verb", required=True, metavar="VERB", parser_class=_OneLineErrors
    )

    def verb(name: str, text: str, agent: str = "", **kw: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = verbs.add_parser(
            name, parents=[common], help=text, description=text, formatter_class=fmt, **kw
        )
        if agent:  # optional, with this default
            p.add_argument("agent", nargs="?", default=agent, help="the agent id to act as")
        else:
            p.add_argument("agent", help="the agent id to act as")
        return p

    v = verb("store", "store one memory")
    v.add_argument("text", help="what to remember (at most store.max_chars characters)")
    v.add_argument("--scope", help="default: the agent's own, agent:AGENT")
    v.add_argument("--category", choices=CATEGORY_LABELS, help="default: detected from the text")
    v.add_argument("--importance", type=_fraction, help="0..1; default 0.7 (daemon setting)")
    v.add_argument(
        "--metadata",
        type=_key_value,
        action="append",
        metavar="KEY=VALUE",
        help="a metadata entry (repeatable)",
    )
    v.add_argument("--ttl", choices=sorted(TTLS), help="session = 24 h, short = 14 days")
    v = verb("recall", "the memories most relevant to a query", aliases=["search"])
    v.add_argument("query", help="what to look for, in any language")
    v.add_argument("--limit", type=_count(1), default=5, help="at most this many")
    v.add_argument("--min-score", type=_fraction, default=0.0, help="final score floor")
    v.add_argument(
        "--explain",
        action="store_true",
        help="each stage's score, the query's language and any time window it names",
    )
    v.add_argument("--after", type=_when, help="only memories created at or after (ISO 8601)")
    v.add_argument("--before", type=_when, help="only memories created before (ISO 8601)")
    v.add_argument(
        "--reference-time", type=_when, help="resolve 'yesterday', 'last week' ... against this"
    )
    v.add_argument("--timezone", help="IANA zone for time expressions (default: the daemon's)")
    v.add_argument(
        "--no-time-expressions",
        action="store_true",
        help="do not read time expressions in the query",
    )
    v = verb("forget", "delete a memory by id, or by its words", aliases=["delete"])
    g = v.add_mutually_exclusive_group(required=True)
    g.add_argument("--id", help="the memory's id")
    g.add_argument("--query", help="deletes only a single strong match; else lists the nearest")
    v = verb("get", "one memory by id")
    v.add_argument("id", help="the memory's id")
    v = verb("list", "the agent's memories, newest first, a page at a time")
    v.add_argument("--page-size", type=_count(1), default=20, help="memories per page")
    v.add_argument("--page-token", help="next_page_token of the previous page")
    _add_filters(v)
    v.add_argument("--oldest-first", action="store_true", help="default: newest first")
    v = verb("delete-bulk", "forget every memory matching the filters")
    _add_filters(v)
    v.add_argument("--older-than-days", type=float, help="only memories created before then")
    v.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    v.add_argument("--yes", action="store_true", help="do not ask (needed without a terminal)")
    verb("doctor", "check a running daemon: health, model, store, a recall", agent="doctor")
    v = verb("export", "JSONL of the agent's memories on stdout")
    v.add_argument("--scope", action="append", help="only these scopes (repeatable)")
    v.add_argument("--all-scopes", action="store_true", help="every agent's (operator key)")
    v = verb("import", "JSONL rows (from export, or with only 'text') into the agent")
    v.add_argument("file", help="a JSONL file, or - for stdin")
    v.add_argument("--into-scope", help="put every row in this scope (links are dropped)")
    v = verb("conflicts", "the decision conflict log")
    v.add_argument("--limit", type=_count(1), default=20, help="the newest this many")
    v = verb("stats", "counts by scope and category, model, index size")
    v.add_argument("--daemon-wide", action="store_true", help="whole daemon (operator key)")
    return verbs


def _unreachable(address: str, error: Any) -> CtlError | None:
    if error.code.name != "UNAVAILABLE":
        return None
    if error.message.startswith("memoryd is starting"):
        return CtlError(
            f"memoryd at {address} is still starting (loading models and the index); "
            "try again in a few seconds",
            EXIT_UNREACHABLE,
        )
    return CtlError(
        f"no memoryd answers at {address} ({_connect_reason(error.message)}); start "
        "one with `./dev serve` or `memoryd serve`, or point --address (MEMORYD_ADDRESS) at it",
        EXIT_UNREACHABLE,
    )


def _connect_reason(message: str) -> str:
    """The cause at the end of gRPC core's chain ("failed to connect to all addresses; last
    error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused"
    says "Connection refused"), whole words only."""
    first = message.splitlines()[0] if message else ""
    reason = first.rpartition(": ")[2].strip() or first.strip()
    if len(reason) > 120:
        reason = reason[:120].rsplit(" ", 1)[0] + " ..."
    return reason or "unreachable"


def run(args: argparse.Namespace) -> int:
    from memoryd_client import MemoryClient, MemorydError, tls_credentials

    args.verb = ALIASES.get(args.verb, args.verb)
    token = os.environ.get("MEMORYD_AUTH_TOKEN") or None
    try:
        creds = None
        if args.tls_ca or args.tls_cert or args.tls_key:
            creds = tls_credentials(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key)
        # No retries: a refused connection is said at once, not after a second of backoff.
        with MemoryClient(
            args.address, token=token, timeout=args.timeout, credentials=creds, retries=0
        ) as client:
            return VERBS[args.verb](client, args)
    except CtlError as e:
        print(f"memoryd ctl: {e}", file=sys.stderr)
        return e.code
    except MemorydError as e:
        unreachable = _unreachable(args.address, e)
        if unreachable is not None:
            print(f"memoryd ctl: {unreachable}", file=sys.stderr)
            return unreachable.code
        hint = ""
        if e.code.name == "UNAUTHENTICATED":
            hint = (
                " (memoryd ctl sends the key in MEMORYD_AUTH_TOKEN, which is not set)"
                if token is None
                else " (the key in MEMORYD_AUTH_TOKEN is not one the daemon knows)"
            )
        print(f"memoryd ctl: {e.code.name}: {e.message}{hint}", file=sys.stderr)
        return EXIT_REFUSED
    except OSError as e:
        if isinstance(e, BrokenPipeError):  # `ctl export ... | head`: the reader is gone
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_OK
        print(f"memoryd ctl: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return EXIT_FILE
    except KeyboardInterrupt:
        print("memoryd ctl: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
