"""``[vault]`` settings of the CLI: defaults < the TOML file (``--config`` or
``MEMORYD_CONFIG``, the daemon's file: its ``[vault]`` table) < ``MEMORYD_VAULT__*``
environment variables < command-line flags. The daemon never reads the vault."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

DEFAULT_REVIEW_ROOT = "00-system/memoryd"


class VaultConfigError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class VaultSettings:
    enabled: bool = False
    path: str = ""
    agent: str = ""
    review_root: str = DEFAULT_REVIEW_ROOT
    allow_dot_obsidian_write: bool = False
    records: bool = True
    timezone: str = "UTC"  # of dates given without one (review snooze --until 2026-12-01)
    approval_key_file: str = ""  # default $XDG_CONFIG_HOME/memoryd/vault-approval.key
    morning_enabled: bool = False
    morning_cron: str = "0 9 * * *"
    morning_timezone: str = "UTC"


_BOOL = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
    "": False,
}


def _coerce(name: str, value: Any, kind: type) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL:
            return _BOOL[value.strip().lower()]
        raise VaultConfigError(f"setting vault.{name}: expected true or false, got {value!r}")
    if not isinstance(value, str):
        raise VaultConfigError(f"setting vault.{name}: expected a string, got {value!r}")
    return value


def load(config_file: Path | None = None, environ: dict[str, str] | None = None) -> VaultSettings:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or (Path(p) if (p := env.get("MEMORYD_CONFIG")) else None)
    if path is not None:
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("vault", {})
        except OSError as e:
            raise VaultConfigError(f"cannot read config file {path}: {e.strerror}") from e
        except tomllib.TOMLDecodeError as e:
            raise VaultConfigError(f"config file {path} is not valid TOML: {e}") from e
        morning = table.pop("morning_review", {})
        values.update(table)
        values.update({f"morning_{k}": v for k, v in morning.items()})
    for key, value in env.items():
        if key.startswith("MEMORYD_VAULT__"):
            name = key[len("MEMORYD_VAULT__") :].lower().replace("morning_review__", "morning_")
            values[name] = value
    kinds = {f.name: type(f.default) for f in fields(VaultSettings)}
    unknown = sorted(set(values) - set(kinds))
    if unknown:
        raise VaultConfigError(f"unknown vault setting(s): {', '.join(unknown)}")
    return replace(VaultSettings(), **{k: _coerce(k, v, kinds[k]) for k, v in values.items()})
