#!/usr/bin/env bash
# Install and build the TypeScript client (clients/typescript).
#
#   scripts/ts_setup.sh                 npm ci (only when package-lock.json or Node changed
#                                       since the last successful install), then npm run build
#   scripts/ts_setup.sh --install-only  npm ci only (./dev proto: the build needs the stubs
#                                       that generation is about to refresh)
#
# Exits non-zero if Node/npm are missing or a step fails.
set -euo pipefail

cd "$(dirname "$0")/../clients/typescript"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "ts_setup: $tool not found; install Node >= 20" >&2; exit 1; }
done

# The fingerprint of an install: the lockfile's bytes and the Node version.
fingerprint=$(node -e '
  const lock = require("node:fs").readFileSync("package-lock.json");
  const hash = require("node:crypto").createHash("sha256").update(lock).digest("hex");
  process.stdout.write(`${hash} ${process.version}`);
')
stamp=node_modules/.memoryd-ts-setup

if [[ ! -f $stamp || "$(cat "$stamp")" != "$fingerprint" ]]; then
  npm ci --no-audit --no-fund
  printf '%s' "$fingerprint" >"$stamp"
fi

if [[ "${1:-}" != "--install-only" ]]; then
  npm run build
fi
