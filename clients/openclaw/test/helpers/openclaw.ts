/**
 * A real OpenClaw for the tests, isolated in a temporary home: its own HOME/OPENCLAW_HOME
 * (so ~/.openclaw/openclaw.json is the test's hand-written config), its own log file,
 * nothing inherited from the developer's OpenClaw or memoryd settings. Every process is
 * started in its own process group with a deadline, and killed as a group.
 */

import type { ChildProcess } from "node:child_process";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { OPENCLAW_CLI, PACKAGE_ROOT } from "./paths.ts";

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface InvokeResult {
  status: number;
  body: {
    ok: boolean;
    result?: { content: { type: string; text: string }[]; details: Record<string, unknown> };
    error?: { type: string; message: string };
  };
}

export class OpenClawHome {
  readonly dir: string;
  readonly configPath: string;
  readonly logFile: string;
  private readonly children = new Set<ChildProcess>();

  private constructor(dir: string) {
    this.dir = dir;
    this.configPath = join(dir, ".openclaw", "openclaw.json");
    this.logFile = join(dir, "openclaw.log");
  }

  static async create(): Promise<OpenClawHome> {
    const dir = await mkdtemp(join(tmpdir(), "memoryd-openclaw-home-"));
    await mkdir(join(dir, ".openclaw"), { recursive: true });
    return new OpenClawHome(dir);
  }

  /** The environment of every OpenClaw process: only this home, no inherited settings. */
  env(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (/^(OPENCLAW_|MEMORYD_|NODE_OPTIONS$|NODE_TEST)/.test(key)) continue;
      env[key] = value;
    }
    return {
      ...env,
      HOME: this.dir,
      OPENCLAW_HOME: this.dir,
      XDG_CONFIG_HOME: join(this.dir, ".config"),
      XDG_CACHE_HOME: join(this.dir, ".cache"),
      XDG_DATA_HOME: join(this.dir, ".local", "share"),
      XDG_STATE_HOME: join(this.dir, ".local", "state"),
      NO_COLOR: "1",
      FORCE_COLOR: "0",
      ...extra,
    };
  }

  async writeConfig(config: unknown): Promise<void> {
    await writeFile(this.configPath, `${JSON.stringify(config, null, 2)}\n`);
  }

  /** The plugin's lines ("memoryd: ...") in the OpenClaw log file, with their levels. */
  async pluginLog(): Promise<{ level: string; message: string }[]> {
    let text: string;
    try {
      text = await readFile(this.logFile, "utf8");
    } catch {
      return [];
    }
    const lines: { level: string; message: string }[] = [];
    for (const line of text.split("\n")) {
      if (!line.includes("memoryd: ")) continue;
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        const meta = entry._meta as { logLevelName?: string } | undefined;
        const message = Object.entries(entry)
          .filter(([key]) => /^\d+$/.test(key))
          .map(([, value]) => String(value))
          .find((value) => value.includes("memoryd: "));
        if (message) lines.push({ level: (meta?.logLevelName ?? "").toLowerCase(), message });
      } catch {
        // a partly written line
      }
    }
    return lines;
  }

  /** Runs `openclaw ARGS` to completion (killed, and rejected, past `timeoutMs`). */
  async run(args: string[], options: { timeoutMs: number; env?: Record<string, string> }): Promise<RunResult> {
    const child = this.spawn(args, options.env);
    let stdout = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => killGroup(child, "SIGKILL"), options.timeoutMs);
    try {
      const [code] = (await once(child, "exit")) as [number | null];
      if (child.signalCode === "SIGKILL") {
        throw new Error(`openclaw ${args.join(" ")} did not finish in ${options.timeoutMs} ms\n${stdout}\n${stderr}`);
      }
      return { code, stdout, stderr };
    } finally {
      clearTimeout(timer);
      killGroup(child, "SIGKILL"); // helpers it may have left behind
    }
  }

  /** Starts `openclaw gateway run` and resolves once `ready()` says it serves. */
  async startGateway(options: {
    port: number;
    token: string;
    env?: Record<string, string>;
    ready: (gateway: Gateway) => Promise<boolean>;
    timeoutMs: number;
  }): Promise<Gateway> {
    const child = this.spawn(
      ["gateway", "run", "--port", String(options.port), "--bind", "loopback", "--auth", "token", "--token", options.token],
      options.env,
    );
    let output = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    const gateway = new Gateway(`http://127.0.0.1:${options.port}`, options.token, child, () => output);
    const deadline = Date.now() + options.timeoutMs;
    while (!(await options.ready(gateway).catch(() => false))) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`openclaw gateway exited before it was ready:\n${output}`);
      }
      if (Date.now() > deadline) {
        await gateway.stop();
        throw new Error(`openclaw gateway was not ready in ${options.timeoutMs} ms:\n${output}`);
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    return gateway;
  }

  /** Kills whatever is still running and removes the home. */
  async dispose(): Promise<void> {
    for (const child of this.children) killGroup(child, "SIGKILL");
    // A killed process may still be flushing into the home for a moment.
    await rm(this.dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  }

  private spawn(args: string[], extraEnv: Record<string, string> = {}): ChildProcess {
    // process.execPath is the real node (not a wrapper script), so the group is ours.
    const child = spawn(process.execPath, [OPENCLAW_CLI, ...args], {
      cwd: PACKAGE_ROOT,
      env: this.env(extraEnv),
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    this.children.add(child);
    child.once("exit", () => this.children.delete(child));
    const reap = (): void => killGroup(child, "SIGKILL");
    process.once("exit", reap);
    child.once("exit", () => process.off("exit", reap));
    return child;
  }
}

export class Gateway {
  readonly url: string;
  private readonly token: string;
  private readonly child: ChildProcess;
  readonly output: () => string;

  constructor(url: string, token: string, child: ChildProcess, output: () => string) {
    this.url = url;
    this.token = token;
    this.child = child;
    this.output = output;
  }

  /** POST /tools/invoke: one tool call for one agent, as an HTTP client would make it. */
  async invoke(tool: string, agentId: string, args?: unknown): Promise<InvokeResult> {
    const response = await fetch(`${this.url}/tools/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
      body: JSON.stringify({ tool, agentId, ...(args === undefined ? {} : { args }) }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await response.text();
    let body: InvokeResult["body"];
    try {
      body = JSON.parse(text) as InvokeResult["body"];
    } catch {
      body = { ok: false, error: { type: "not_json", message: text } };
    }
    return { status: response.status, body };
  }

  /** SIGTERM to the gateway's process group; SIGKILL if it is not gone in 15 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = once(this.child, "exit");
    killGroup(this.child, "SIGTERM");
    const timer = setTimeout(() => killGroup(this.child, "SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
    killGroup(this.child, "SIGKILL");
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  server.close();
  await once(server, "close");
  return port;
}
