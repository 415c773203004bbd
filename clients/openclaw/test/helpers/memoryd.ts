/**
 * A real memoryd for the tests: a free loopback port, a fresh data directory, stopped with
 * SIGTERM. The interpreter is $MEMORYD_PYTHON, by default the repository's .venv.
 */

import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { REPO_ROOT } from "./paths.ts";

const START_TIMEOUT_MS = 180_000;
const STOP_TIMEOUT_MS = 30_000;

export interface Daemon {
  /** "127.0.0.1:PORT" (host:port; the scheme is the client's `tls` setting) */
  address: string;
  /** What the daemon wrote to stderr (its log). */
  log(): string;
  /** SIGTERM, wait for the exit (SIGKILL after 30 s), remove the data directory. */
  stop(): Promise<void>;
}

export interface MemorydOptions {
  /** MEMORYD_AUTH_TOKEN: the single shared token. */
  token?: string;
  /** More settings as environment variables, e.g. { MEMORYD_AUTH__KEYS_FILE: path }. */
  env?: Record<string, string>;
}

export async function startMemoryd(options: MemorydOptions = {}): Promise<Daemon> {
  const dataDir = await mkdtemp(join(tmpdir(), "memoryd-openclaw-test-"));
  const env = { ...process.env };
  delete env.MEMORYD_AUTH_TOKEN;
  if (options.token) env.MEMORYD_AUTH_TOKEN = options.token;
  Object.assign(env, options.env);
  const python = resolve(REPO_ROOT, process.env.MEMORYD_PYTHON ?? ".venv/bin/python");
  const child = spawn(python, ["-m", "memoryd", "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir], {
    env,
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((done) => {
    child.once("exit", () => done());
    child.once("error", () => child.pid === undefined && done());
  });
  const reap = (): void => void child.kill("SIGKILL");
  process.once("exit", reap);
  void exited.then(() => process.off("exit", reap));

  let port: number;
  try {
    port = await waitForServing(child, exited, () => stderr);
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    address: `127.0.0.1:${port}`,
    log: () => stderr,
    stop() {
      stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
        await rm(dataDir, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

function waitForServing(child: ChildProcess, exited: Promise<void>, stderr: () => string): Promise<number> {
  return new Promise((resolvePort, reject) => {
    let stdout = "";
    const timer = setTimeout(
      () => reject(new Error(`memoryd did not start in ${START_TIMEOUT_MS} ms:\n${stderr()}`)),
      START_TIMEOUT_MS,
    );
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
      const match = /memoryd serving on \S+:(\d+)/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    });
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(new Error(`could not run ${child.spawnfile} (set MEMORYD_PYTHON?): ${error.message}`));
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`memoryd exited before serving:\n${stderr()}`));
    });
  });
}
