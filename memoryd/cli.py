"""Command line: ``memoryd serve`` runs the daemon; ``memoryd ctl ...`` talks to one.

``ctl`` is built on the Python client (memoryd_client); every subcommand takes
``--json`` for scripts. The token comes from ``MEMORYD_AUTH_TOKEN``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict, MessageToJson, Parse

from memoryd.core.errors import ConfigError, DataCorrupt

CATEGORIES = ["preference", "fact", "decision", "entity", "other"]


def _category_number(name: str) -> int:
    return CATEGORIES.index(name) + 1


def _serve(args: argparse.Namespace) -> int:
    from memoryd.config import load_settings
    from memoryd.server import serve

    overrides: dict[str, Any] = {}
    if args.listen:
        overrides["listen"] = args.listen
    if args.data_dir:
        overrides["data_dir"] = args.data_dir
    if args.log_level:
        overrides["log_level"] = args.log_level
    if args.open_last_good:
        overrides["storage"] = {"open_last_good": True}
    try:
        settings = load_settings(args.config, overrides)
    except (ConfigError, DataCorrupt) as e:
        print(f"memoryd: {e}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        asyncio.run(serve(settings))
    except (ConfigError, DataCorrupt) as e:  # says what is wrong and what to do: no traceback
        print(f"memoryd: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover - SIGINT is handled inside serve
        pass
    return 0


def _reembed(args: argparse.Namespace) -> int:
    from memoryd.config import load_settings
    from memoryd.reembed import reembed

    overrides: dict[str, Any] = {}
    if args.model_dir:
        overrides["embedder"] = {"model_dir": args.model_dir}
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s")
    try:
        settings = load_settings(args.config, overrides)
        n = reembed(settings, args.source, args.target)
    except (ConfigError, DataCorrupt) as e:
        print(f"memoryd: {e}", file=sys.stderr)
        return 2
    print(f"re-embedded {n} memories into {args.target}")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from memoryd.config import load_settings
    from memoryd.reembed import restore

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s")
    try:
        settings = load_settings(args.config, {"data_dir": args.data_dir})
        n = restore(settings, args.backup, args.data_dir)
    except (ConfigError, DataCorrupt) as e:
        print(f"memoryd: {e}", file=sys.stderr)
        return 2
    print(f"restored {n} memories into {args.data_dir}")
    return 0


def _delete_bulk(c: Any, args: argparse.Namespace) -> int:
    """Forget every memory matching the filters (by id, one at a time); --dry-run lists."""
    from datetime import UTC, datetime, timedelta

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
            categories=[_category_number(x) for x in args.category or ()],
        )
        if cutoff is None or m.created_at.ToDatetime(tzinfo=UTC) < cutoff
    ]
    deleted = []
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
            print(_line(m))
    return 0


def _doctor(c: Any, args: argparse.Namespace) -> int:
    """Checks a running daemon: reachable, healthy, model and store, a read round trip."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    checks: list[tuple[str, bool, str]] = []
    channel = grpc.insecure_channel(args.address)
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
        checks.append(("store", True, f"{s.store_rows} memories, index {s.index_bytes} bytes"))
        checks.append(("version", True, s.version))
        hits = c.recall(args.agent, "memoryd doctor probe", limit=1)
        checks.append(("recall", True, f"answered ({len(hits.results)} result)"))
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
    return 0 if ok else 1


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "request_id": getattr(record, "request_id", "-"),
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(level: str, fmt: str) -> None:
    from memoryd.api.errors import RequestIdFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(
        _JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s")
    )
    logging.basicConfig(level=level, handlers=[handler])


def _print(message: Any, as_json: bool, human: str) -> None:
    if as_json:
        print(
            json.dumps(MessageToDict(message, preserving_proto_field_name=True), ensure_ascii=False)
        )
    else:
        print(human)


def _line(m: Any, score: float | None = None) -> str:
    head = f"{m.id}  [{m.scope}]"
    if score is not None:
        head += f"  score={score:.3f}"
    return f"{head}\n    {m.text}"


def _ctl(args: argparse.Namespace) -> int:
    from memoryd_client import MemoryClient, MemorydError, pb

    token = os.environ.get("MEMORYD_AUTH_TOKEN") or None
    args.verb = {"search": "recall", "delete": "forget"}.get(args.verb, args.verb)
    try:
        with MemoryClient(args.address, token=token, timeout=args.timeout) as c:
            if args.verb == "store":
                r = c.store(
                    args.agent,
                    args.text,
                    scope=args.scope or "",
                    category=_category_number(args.category) if args.category else 0,
                    importance=args.importance,
                )
                outcome = pb.StoreOutcome.Name(r.outcome).removeprefix("STORE_OUTCOME_").lower()
                _print(r, args.json, f"{outcome}: {r.memory.id}")
            elif args.verb == "recall":
                rr = c.recall(args.agent, args.query, limit=args.limit, min_score=args.min_score)
                lines = [_line(h.memory, h.score) for h in rr.results] or ["(no memories)"]
                _print(rr, args.json, "\n".join(lines))
            elif args.verb == "forget":
                fr = c.forget(args.agent, id=args.id or "", query=args.query or "")
                if fr.deleted_ids:
                    human = "deleted: " + ", ".join(fr.deleted_ids)
                else:
                    human = "\n".join(
                        ["nothing deleted; candidates:"]
                        + [_line(h.memory, h.score) for h in fr.candidates]
                    )
                _print(fr, args.json, human)
            elif args.verb == "get":
                m = c.get(args.agent, args.id)
                _print(m, args.json, _line(m))
            elif args.verb == "list":
                lr = c.list(
                    args.agent,
                    page_size=args.page_size,
                    page_token=args.page_token or "",
                    scopes=args.scope or (),
                    categories=[_category_number(x) for x in args.category or ()],
                    oldest_first=args.oldest_first,
                )
                lines = [_line(m) for m in lr.memories] or ["(no memories)"]
                if lr.next_page_token:
                    lines.append(f"next page: --page-token {lr.next_page_token}")
                _print(lr, args.json, "\n".join(lines))
            elif args.verb == "export":
                count = 0
                for m in c.export(args.agent, scopes=args.scope or ()):
                    print(MessageToJson(m, preserving_proto_field_name=True, indent=None))
                    count += 1
                print(f"exported {count} memories", file=sys.stderr)
            elif args.verb == "import":
                source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115
                with source:
                    memories = (
                        Parse(line, pb.Memory(), ignore_unknown_fields=True)
                        for line in source
                        if line.strip()
                    )
                    ir = c.import_memories(args.agent, memories)
                human = f"imported {ir.imported}, skipped {ir.skipped_existing} existing"
                human += "".join(f"\n  {e.code_name}: {e.message}" for e in ir.errors)
                _print(ir, args.json, human)
                if ir.errors:
                    return 1
            elif args.verb == "delete-bulk":
                return _delete_bulk(c, args)
            elif args.verb == "doctor":
                return _doctor(c, args)
            elif args.verb == "conflicts":
                cr = c.conflicts(args.agent, limit=args.limit)
                lines = [
                    f"{x.new_agent_id} vs {x.existing_agent_id} ({x.score:.2f}, {x.merge_decision})"
                    f"\n    new:      {x.new_text}\n    existing: {x.existing_text}"
                    for x in cr.conflicts
                ] or ["(no conflicts)"]
                _print(cr, args.json, "\n".join(lines))
            elif args.verb == "stats":
                s = c.stats(args.agent)
                human = "\n".join(
                    [f"memories visible to {args.agent}: {s.total}"]
                    + [f"  {k}: {v}" for k, v in sorted(s.by_scope.items())]
                    + [f"model: {s.embedding_model} ({s.embedding_dim}-d), version {s.version}"]
                )
                _print(s, args.json, human)
    except MemorydError as e:
        print(f"memoryd ctl: {e.code.name}: {e.message}", file=sys.stderr)
        return 1
    return 0


def _reembed_args(r: argparse.ArgumentParser) -> None:
    r.add_argument("--from", dest="source", type=Path, required=True, help="old --data-dir")
    r.add_argument("--to", dest="target", type=Path, required=True, help="new, empty --data-dir")
    r.add_argument("--model-dir", type=Path, help="model.onnx + tokenizer.json (default built-in)")
    r.add_argument("--config", type=Path, help="TOML settings (embedder, retrieval)")
    r.set_defaults(func=_reembed)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryd", description="long-term memory daemon for AI agents")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the daemon")
    s.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:50051; port 0 = any free)")
    s.add_argument("--data-dir", type=Path, help="where the embedded store lives")
    s.add_argument("--config", type=Path, help="TOML settings file (also MEMORYD_CONFIG)")
    s.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    s.add_argument(
        "--open-last-good",
        action="store_true",
        help="if the newest version of the store is damaged, open the newest one that reads "
        "whole (later writes are lost) instead of refusing to start",
    )
    s.set_defaults(func=_serve)

    _reembed_args(sub.add_parser("reembed", help="copy a store into a new one, another model"))

    b = sub.add_parser("restore", help="load a backup file into an empty data dir")
    b.add_argument("backup", type=Path, help="memoryd-backup-*.jsonl.gz (or a ctl export file)")
    b.add_argument("--data-dir", type=Path, required=True, help="an empty data dir")
    b.add_argument("--config", type=Path, help="TOML settings (embedder, retrieval)")
    b.set_defaults(func=_restore)

    c = sub.add_parser("ctl", help="talk to a running daemon")
    c.add_argument("--address", default=os.environ.get("MEMORYD_ADDRESS", "127.0.0.1:50051"))
    c.add_argument("--timeout", type=float, default=10.0)
    c.add_argument("--json", action="store_true", help="print the response as JSON")
    # --json is accepted after the verb too: `memoryd ctl stats main --json`.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    verbs = c.add_subparsers(dest="verb", required=True)
    v = verbs.add_parser("store", parents=[common])
    v.add_argument("agent")
    v.add_argument("text")
    v.add_argument("--scope")
    v.add_argument("--category", choices=CATEGORIES)
    v.add_argument("--importance", type=float)
    v = verbs.add_parser("recall", aliases=["search"], parents=[common])
    v.add_argument("agent")
    v.add_argument("query")
    v.add_argument("--limit", type=int, default=5)
    v.add_argument("--min-score", type=float, default=0.0)
    v = verbs.add_parser("forget", aliases=["delete"], parents=[common])
    v.add_argument("agent")
    g = v.add_mutually_exclusive_group(required=True)
    g.add_argument("--id")
    g.add_argument("--query")
    v = verbs.add_parser("get", parents=[common])
    v.add_argument("agent")
    v.add_argument("id")
    v = verbs.add_parser("list", parents=[common])
    v.add_argument("agent")
    v.add_argument("--page-size", type=int, default=20)
    v.add_argument("--page-token")
    v.add_argument("--scope", action="append", help="only this scope (repeatable)")
    v.add_argument("--category", action="append", choices=CATEGORIES)
    v.add_argument("--oldest-first", action="store_true", help="default: newest first")
    v = verbs.add_parser("delete-bulk", parents=[common], help="forget every match")
    v.add_argument("agent")
    v.add_argument("--scope", action="append", help="only this scope (repeatable)")
    v.add_argument("--category", action="append", choices=CATEGORIES)
    v.add_argument("--older-than-days", type=float)
    v.add_argument("--dry-run", action="store_true", help="list what would be deleted")
    v = verbs.add_parser("reembed", help="offline: copy a store into a new one with another model")
    _reembed_args(v)
    v = verbs.add_parser("doctor", parents=[common], help="check a running daemon")
    v.add_argument("agent", nargs="?", default="doctor")
    v = verbs.add_parser("export", parents=[common], help="JSONL of memories on stdout")
    v.add_argument("agent")
    v.add_argument("--scope", action="append", help="only these scopes (repeatable)")
    v = verbs.add_parser("import", parents=[common], help="JSONL from export (file or -)")
    v.add_argument("agent")
    v.add_argument("file")
    v = verbs.add_parser("conflicts", parents=[common], help="the decision conflict log")
    v.add_argument("agent")
    v.add_argument("--limit", type=int, default=20)
    v = verbs.add_parser("stats", parents=[common])
    v.add_argument("agent")
    c.set_defaults(func=_ctl)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
