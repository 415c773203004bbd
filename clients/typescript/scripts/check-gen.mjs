/**
 * CI freshness check: regenerate from ../../protos into a temp dir and fail if src/gen
 * differs (a file changed, missing or extra). Fix with `npm run gen`.
 */

import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "node_modules", ".bin");

/** Every file under dir, as paths relative to it. */
function files(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath ?? entry.path, entry.name)))
    .sort();
}

/** Regenerates into `out` and compares; returns the process exit code. */
function check(out) {
  // buf finds the local protoc-gen-es plugin on PATH.
  const env = { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` };
  const buf = spawnSync(join(bin, "buf"), ["generate", "../../protos", "--output", out], {
    cwd: root,
    env,
    stdio: "inherit",
  });
  if (buf.status !== 0) {
    console.error(`check:gen: buf generate failed (${buf.error?.message ?? `exit ${buf.status}`})`);
    return 2;
  }

  const committed = join(root, "src", "gen");
  const fresh = join(out, "src", "gen");
  const want = files(fresh);
  const have = files(committed);
  const problems = [
    ...want.filter((f) => !have.includes(f)).map((f) => `missing: src/gen/${f}`),
    ...have.filter((f) => !want.includes(f)).map((f) => `extra:   src/gen/${f}`),
    ...want
      .filter((f) => have.includes(f))
      .filter((f) => !readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f))))
      .map((f) => `stale:   src/gen/${f}`),
  ];
  if (want.length === 0) problems.push("buf generated nothing: is ../../protos empty?");
  if (problems.length > 0) {
    console.error(["src/gen is out of date with ../../protos:", ...problems, "run: npm run gen"].join("\n  "));
    return 1;
  }
  console.log(`check:gen: src/gen is up to date (${want.length} file(s))`);
  return 0;
}

const out = mkdtempSync(join(tmpdir(), "memoryd-ts-gen-"));
try {
  process.exitCode = check(out);
} finally {
  rmSync(out, { recursive: true, force: true });
}
