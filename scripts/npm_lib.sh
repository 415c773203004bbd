# Shell functions shared by the scripts that install an npm project (ts_setup.sh,
# openclaw_setup.sh, mcp_inspector_setup.sh); source it, do not run it.

# require_node WHO [HINT]: exit 1, naming WHO (and HINT), unless node and npm are on PATH.
require_node() {
  local who=$1 hint=${2:-} tool
  for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "$who: $tool not found${hint:+; $hint}" >&2; exit 1; }
  done
}

# install_once STAMP COMMAND...: run COMMAND (an npm install) in the current directory
# unless the lockfile's bytes and the Node version are those of the last successful run,
# recorded in node_modules/STAMP.
install_once() {
  local stamp=node_modules/$1 fingerprint
  shift
  fingerprint=$(node -e '
    const lock = require("node:fs").readFileSync("package-lock.json");
    const hash = require("node:crypto").createHash("sha256").update(lock).digest("hex");
    process.stdout.write(`${hash} ${process.version}`);
  ')
  if [[ ! -f $stamp || "$(cat "$stamp")" != "$fingerprint" ]]; then
    "$@"
    printf '%s' "$fingerprint" >"$stamp"
  fi
}
