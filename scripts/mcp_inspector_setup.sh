#!/usr/bin/env bash
# Install the MCP Inspector (pinned in tests/e2e/mcp_inspector/package-lock.json) whose CLI
# mode the MCP tests drive against `memoryd mcp` as a third-party client.
#
#   scripts/mcp_inspector_setup.sh    install, only when the lockfile or Node changed since
#                                     the last successful install; prints the path of
#                                     the CLI's launcher (run it with node)
#
# `npm install` (which keeps the versions the lockfile pins), not `npm ci`: vite, a
# dependency of the Inspector, names an optional Windows-only package that the registry
# does not have, so the lockfile can never list it and `npm ci` refuses the lockfile.
set -euo pipefail

cd "$(dirname "$0")/../tests/e2e/mcp_inspector"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "mcp_inspector_setup: $tool not found" >&2; exit 1; }
done

fingerprint=$(node -e '
  const lock = require("node:fs").readFileSync("package-lock.json");
  const hash = require("node:crypto").createHash("sha256").update(lock).digest("hex");
  process.stdout.write(`${hash} ${process.version}`);
')
stamp=node_modules/.memoryd-setup

if [[ ! -f $stamp || "$(cat "$stamp")" != "$fingerprint" ]]; then
  npm install --no-audit --no-fund >&2
  printf '%s' "$fingerprint" >"$stamp"
fi

# Its launcher, run with node: npm links no bin for a package whose scripts
# package.json's allowScripts turns off (the Inspector's postinstall is for source
# checkouts only).
echo "$(pwd)/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
