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

source "$(dirname "$0")/npm_lib.sh"
cd "$(dirname "$0")/../tests/e2e/mcp_inspector"

require_node mcp_inspector_setup
install_once .memoryd-setup npm install --no-audit --no-fund >&2

# Its launcher, run with node: npm links no bin for a package whose scripts
# package.json's allowScripts turns off (the Inspector's postinstall is for source
# checkouts only).
echo "$(pwd)/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
