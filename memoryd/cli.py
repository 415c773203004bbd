"""Command line: ``memoryd serve`` runs the daemon; ``memoryd ctl ...`` talks to one;
``memoryd mcp`` serves its tools to MCP hosts (memoryd_client.mcp_server).

``ctl`` is built on the Python client (memoryd_client); every subcommand takes
``--json`` for scripts. The token comes from ``MEMORYD_AUTH_TOKEN``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from memoryd import __version__, ctl
from memoryd.core.errors import ConfigError, DataCorrupt

if TYPE_CHECKING:
    from memoryd.config import Settings


def _limit_malloc_arenas() -> None:
    """At most 2 glibc malloc arenas (its default is 8 per core), before any thread
    starts: with one arena per LanceDB reader thread, the pages the start-up scan freed
    stayed in those arenas, and at 100k memories the daemon held ~9 KB per memory instead
    of ~4 (bench/load_rss.py, bench/RESULTS.md). MALLOC_ARENA_MAX set by the user wins;
    elsewhere than glibc there is nothing to set."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(-8, 2)  # M_ARENA_MAX


def _serve(args: argparse.Namespace) -> int:
    _limit_malloc_arenas()
    # gRPC's C core writes its own lines to stderr (e.g. a second copy of a bind error);
    # memoryd says what matters in its log. GRPC_VERBOSITY set by the user still wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from memoryd.config import load_settings
    from memoryd.server import serve

    overrides: dict[str, Any] = {}
    if args.listen:
        overrides["listen"] = args.listen
    if args.data_dir:
        overrides["data_dir"] = args.data_dir
    if args.log_level:
        overrides["log_level"] = args.log_level
    if args.insecure:
        overrides["server"] = {"insecure": True}
    if args.open_last_good:
        overrides["storage"] = {"open_last_good": True}
    # What reading the settings warns of (old setting names) waits for the log format
    # those settings choose, then goes to the log like every other line.
    held = _HeldRecords()
    config_log = logging.getLogger("memoryd.config")
    config_log.addHandler(held)
    config_log.propagate = False
    try:
        settings = load_settings(args.config, overrides)
    except (ConfigError, DataCorrupt) as e:
        for record in held.records:
            print(record.getMessage(), file=sys.stderr)
        print(f"memoryd: {e}", file=sys.stderr)
        return 2
    finally:
        config_log.removeHandler(held)
        config_log.propagate = True
    configure_logging(settings.log_level, settings.log_format)
    for record in held.records:
        config_log.handle(record)
    try:
        abandoned = asyncio.run(serve(settings))
    except (ConfigError, DataCorrupt) as e:  # says what is wrong and what to do: no traceback
        print(f"memoryd: {e}", file=sys.stderr)
        if getattr(e, "abandoned_compaction", False):
            _exit_now(2)
        return 2
    except KeyboardInterrupt:  # pragma: no cover - a Ctrl-C before serve takes SIGINT over
        return 0
    except Exception as e:
        if getattr(e, "abandoned_compaction", False):
            traceback.print_exc()
            _exit_now(1)
        raise
    if abandoned:
        _exit_now(0)
    return 0


def _exit_now(code: int) -> NoReturn:
    """End the process now, its logs and output flushed: everything it owes is done (every
    acknowledged write committed, the token file's map saved), and an ordinary exit would
    wait for the compaction the stop abandoned."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _reembed(args: argparse.Namespace) -> int:
    from memoryd.reembed import reembed

    overrides: dict[str, Any] = {}
    embedder: dict[str, Any] = {}
    if args.model:
        embedder["model"] = args.model
    if args.model_dir:
        embedder["model_dir"] = args.model_dir
    if embedder:
        overrides["embedder"] = embedder
    return _offline(
        args.config,
        overrides,
        lambda settings: reembed(settings, args.source, args.target),
        lambda n: f"re-embedded {n} memories into {args.target}",
    )


def _restore(args: argparse.Namespace) -> int:
    from memoryd.reembed import restore

    return _offline(
        args.config,
        {"data_dir": args.data_dir},
        lambda settings: restore(settings, args.backup, args.data_dir),
        lambda n: f"restored {n} memories into {args.data_dir}",
    )


def _offline(
    config: Path | None,
    overrides: dict[str, Any],
    work: Callable[[Settings], int],
    done: Callable[[int], str],
) -> int:
    """An offline verb (reembed, restore): ``work`` on the loaded settings, then ``done``
    of its count; a bad setting or damaged data is one line on stderr and exit 2."""
    from memoryd.config import load_settings

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s")
    try:
        n = work(load_settings(config, overrides))
    except (ConfigError, DataCorrupt) as e:
        print(f"memoryd: {e}", file=sys.stderr)
        return 2
    print(done(n))
    return 0


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


class _HeldRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def configure_logging(level: str, fmt: str) -> None:
    from memoryd.api.interceptors import RequestIdFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(
        _JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s")
    )
    logging.basicConfig(level=level, handlers=[handler])
    # Libraries' own debug lines (asyncio's selector, ...) are not memoryd's to show.
    for name in ("asyncio", "grpc", "urllib3", "filelock"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def _keys_new(args: argparse.Namespace) -> int:
    """A fresh API key: the secret once on stdout, and the entry for the keys file."""
    from memoryd.api.auth import hash_secret, new_secret
    from memoryd.core.principals import AGENT_PATTERN_RE

    bad = [a for a in args.agents if not AGENT_PATTERN_RE.match(a)]
    if bad or not args.agents:
        print(f"memoryd keys: invalid agent pattern(s): {', '.join(bad) or '(none)'}",
              file=sys.stderr)  # fmt: skip
        return 2
    secret = new_secret()
    agents = ", ".join(json.dumps(a) for a in args.agents)
    print(f"secret (give it to the client; it is not stored anywhere): {secret}")
    print("\nappend to the keys file (auth.keys_file):\n")
    print(f'[[key]]\nname = {json.dumps(args.name)}\nsha256 = "{hash_secret(secret)}"')
    print(f"agents = [{agents}]\noperator = {'true' if args.operator else 'false'}")
    print(f"reviewer = {'true' if args.reviewer else 'false'}")
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from memoryd_client.mcp_server import McpSettings, run

    token = os.environ.get("MEMORYD_AUTH_TOKEN") or None
    settings = McpSettings(args.address, args.agent, token, args.timeout, args.insecure)
    return run(settings, args.http)


def _reembed_args(r: argparse.ArgumentParser) -> None:
    r.add_argument("--from", dest="source", type=Path, required=True, help="old --data-dir")
    r.add_argument("--to", dest="target", type=Path, required=True, help="new, empty --data-dir")
    r.add_argument(
        "--model",
        choices=["all-MiniLM-L6-v2", "use-multilingual-v3"],
        help="the built-in model to embed with (default: embedder.model, all-MiniLM-L6-v2)",
    )
    r.add_argument("--model-dir", type=Path, help="model.onnx + tokenizer.json (default built-in)")
    r.add_argument("--config", type=Path, help="TOML settings ([embedder], [recall])")
    r.set_defaults(func=_reembed)


def build_parser() -> argparse.ArgumentParser:
    from memoryd.config import default_data_dir

    p = argparse.ArgumentParser(prog="memoryd", description="long-term memory daemon for AI agents")
    p.add_argument("--version", action="version", version=f"memoryd {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "serve",
        help="run the daemon",
        description="Run the daemon. Every setting also comes from a TOML file (--config or "
        "MEMORYD_CONFIG) and MEMORYD_* environment variables (README: Configuration); the "
        "flags win. It prints 'memoryd serving on HOST:PORT' once ready; Ctrl-C or SIGTERM "
        "stops it cleanly.",
    )
    s.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:50051; port 0 = any free)")
    s.add_argument(
        "--data-dir",
        type=Path,
        help=f"where the embedded store lives (default {default_data_dir()}; "
        "environment: MEMORYD_DATA_DIR)",
    )
    s.add_argument("--config", type=Path, help="TOML settings file (also MEMORYD_CONFIG)")
    s.add_argument(
        "--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="default INFO"
    )
    s.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback --listen address without any credential (refused otherwise)",
    )
    s.add_argument(
        "--open-last-good",
        action="store_true",
        help="if the newest version of the store is damaged, open the newest one that reads "
        "whole (later writes are lost) instead of refusing to start",
    )
    s.set_defaults(func=_serve)

    k = sub.add_parser("keys", help="API keys for the keys file (auth.keys_file)")
    kv = k.add_subparsers(dest="keys_verb", required=True)
    kn = kv.add_parser("new", help="make a new API key: prints the secret and its keys-file entry")
    kn.add_argument("name", help="the principal's name (shown in the access log)")
    kn.add_argument(
        "--agents",
        nargs="+",
        required=True,
        help="agent ids or patterns the key may act for, e.g. 'tenant-a-*'",
    )
    kn.add_argument("--operator", action="store_true", help="daemon-wide Export and Stats")
    kn.add_argument(
        "--reviewer",
        action="store_true",
        help="a person's key: may approve review promotions into shared scopes",
    )
    kn.set_defaults(func=_keys_new)

    reembed_what = "copy a store into a new one, embedded with another model (daemon stopped)"
    _reembed_args(sub.add_parser("reembed", help=reembed_what, description=reembed_what))

    what = "load a backup file into an empty data dir (re-embedding every text)"
    b = sub.add_parser("restore", help=what, description=what)
    b.add_argument("backup", type=Path, help="memoryd-backup-*.jsonl.gz (or a ctl export file)")
    b.add_argument("--data-dir", type=Path, required=True, help="an empty data dir")
    b.add_argument("--config", type=Path, help="TOML settings ([embedder], [recall])")
    b.set_defaults(func=_restore)

    sub.add_parser(
        "vault",
        help="the Markdown/Obsidian review vault (memoryd vault --help)",
        add_help=False,
    )
    ctl_verbs = ctl.add_parser(sub)
    _reembed_args(
        ctl_verbs.add_parser(
            "reembed", help="the same as `memoryd reembed`", description=reembed_what
        )
    )

    m = sub.add_parser("mcp", help="serve the memory tools to MCP hosts (stdio, or --http)")
    m.add_argument("--agent", help="the agent the tools act for (required with stdio)")
    m.add_argument(
        "--address",
        default=os.environ.get("MEMORYD_ADDRESS", "127.0.0.1:50051"),
        help="the daemon's HOST:PORT (environment: MEMORYD_ADDRESS)",
    )
    m.add_argument("--http", metavar="HOST:PORT", help="streamable HTTP on HOST:PORT/mcp")
    m.add_argument("--timeout", type=float, default=10.0, help="deadline of one tool call (s)")
    m.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback --http address in front of a daemon that needs no credential "
        "(refused otherwise)",
    )
    m.set_defaults(func=_mcp)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["vault"]:  # the review vault's own command line (on the client package)
        from memoryd_client.vault.cli import main as vault_main

        return vault_main(argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
