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

source "$(dirname "$0")/npm_lib.sh"
cd "$(dirname "$0")/../clients/typescript"

require_node ts_setup "install Node >= 20"
install_once .memoryd-ts-setup npm ci --no-audit --no-fund

if [[ "${1:-}" != "--install-only" ]]; then
  npm run build
fi
