/**
 * Starts a real memoryd for the tests: a free loopback port, a fresh data directory,
 * stopped with SIGTERM. The interpreter is $MEMORYD_PYTHON, by default the repo's
 * ../../.venv/bin/python relative to this package.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const START_TIMEOUT_MS = 180_000;
const STOP_TIMEOUT_MS = 30_000;

/** The directory holding this package's package.json (works from src or dist). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("package.json not found above the tests");
    dir = parent;
  }
  return dir;
}

export function pythonPath(): string {
  const root = packageRoot();
  return resolve(root, process.env["MEMORYD_PYTHON"] ?? "../../.venv/bin/python");
}

export interface Daemon {
  /** "http://127.0.0.1:PORT" ("https://..." when started with `tls`) */
  address: string;
  /** Everything the daemon wrote to stderr so far (its log). */
  log(): string;
  /** SIGTERM, then wait for the exit; resolves with the exit code. */
  stop(): Promise<number | null>;
}

export interface DaemonOptions {
  /** Start with MEMORYD_AUTH_TOKEN set to this. */
  token?: string;
  /**
   * "serving" (default): resolve once stdout says `memoryd serving on HOST:PORT`.
   * "listening": resolve as soon as the port is bound, while models and the index still
   * load (the daemon then answers UNAVAILABLE); read from its log line
   * `listening on HOST:0 (port N); loading`.
   */
  until?: "serving" | "listening";
  /** Extra settings as environment variables, e.g. { MEMORYD_AUTH__KEYS_FILE: path }. */
  env?: Record<string, string>;
  /** The daemon serves TLS (its settings come through `env`): the address is https. */
  tls?: boolean;
}

export async function startDaemon(options: DaemonOptions = {}): Promise<Daemon> {
  const dataDir = await mkdtemp(join(tmpdir(), "memoryd-ts-test-"));
  const env = { ...process.env };
  delete env["MEMORYD_AUTH_TOKEN"];
  if (options.token) env["MEMORYD_AUTH_TOKEN"] = options.token;
  Object.assign(env, options.env);
  const python = pythonPath();
  const child = spawn(
    python,
    ["-m", "memoryd", "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir],
    { env, cwd: resolve(packageRoot(), "../.."), stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((done) => {
    child.once("exit", (code) => done(code));
    // A process that could not be spawned emits "error" and never "exit".
    child.once("error", () => child.pid === undefined && done(null));
  });
  // A test run that dies must not leave a daemon behind.
  const reap = (): void => void child.kill("SIGKILL");
  process.once("exit", reap);
  void exited.then(() => process.off("exit", reap));

  let port: number;
  try {
    port = await waitForPort(child, exited, () => stderr, options.until ?? "serving");
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }

  return {
    address: `${options.tls ? "https" : "http"}://127.0.0.1:${port}`,
    log: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
      const code = await exited;
      clearTimeout(timer);
      await rm(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

function waitForPort(
  child: ChildProcess,
  exited: Promise<number | null>,
  stderr: () => string,
  until: "serving" | "listening",
): Promise<number> {
  return new Promise((resolvePort, reject) => {
    let stdout = "";
    const timer = setTimeout(() => {
      reject(new Error(`memoryd did not start in ${START_TIMEOUT_MS} ms:\n${stderr()}`));
    }, START_TIMEOUT_MS);
    const found = (match: RegExpExecArray | null): void => {
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    };
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      found(/memoryd serving on \S+:(\d+)/.exec(stdout));
    });
    if (until === "listening") {
      child.stderr!.on("data", () => found(/listening on \S+ \(port (\d+)\)/.exec(stderr())));
    }
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`could not run ${child.spawnfile} (set MEMORYD_PYTHON?): ${error.message}`));
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`memoryd exited with ${code} before serving:\n${stderr()}`));
    });
  });
}
