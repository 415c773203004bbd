/**
 * Auto-recall (before_prompt_build -> HookService.BuildContext) and auto-capture
 * (agent_end -> HookService.Capture), through MemorydClient.buildContext / capture.
 *
 * Both take the agent id from the hook context and do nothing without one: memory is never
 * read or written under a guessed or shared id. Neither may hold up the host: recall has
 * a hard budget (`hookTimeoutMs`) after which the turn goes on without memories, capture
 * has its own deadline, and a failure is logged once (not once per turn) until memoryd
 * answers again.
 */

import { MemorydError } from "@memoryd/client";

import type { MemorydPluginConfig } from "./config.ts";
import { agentEnabled } from "./config.ts";
import type { Connection } from "./connection.ts";
import type { PluginLog } from "./log.ts";
import { turnMessages } from "./messages.ts";

export interface HookDeps {
  config: MemorydPluginConfig;
  connection: () => Connection;
  log: PluginLog;
}

/** The parts of OpenClaw's hook context used here. */
export interface HookContext {
  agentId?: string | undefined;
  sessionId?: string | undefined;
  sessionKey?: string | undefined;
  toolAuthority?: { allows(toolName: string): boolean; assertActive(): void } | undefined;
}

export interface PromptBuildEvent {
  prompt: string;
  currentUserMessage?: string | undefined;
}

export interface AgentEndEvent {
  messages: unknown[];
  success: boolean;
}

/** memoryd refuses longer session ids. */
const MAX_SESSION_ID_CHARS = 256;
/** Time kept back from the budget for the answer to travel back. */
const BUDGET_MARGIN_MS = 150;

const DOWN_KEY = "memoryd-down";

/** before_prompt_build: the `<relevant-memories>` block for this prompt, or nothing. */
export async function recallForPrompt(
  event: PromptBuildEvent,
  ctx: HookContext,
  deps: HookDeps,
): Promise<{ prependContext: string } | undefined> {
  const { config, log } = deps;
  if (!config.autoRecall) return undefined;
  const agentId = hookAgentId(ctx, "auto-recall", log);
  if (!agentId || !agentEnabled(config, agentId)) return undefined;
  // The turn's own request when the host supplies it; `prompt` may carry history.
  const prompt = (event.currentUserMessage ?? event.prompt ?? "").trim();
  if (!prompt) return undefined;
  if (ctx.toolAuthority && !ctx.toolAuthority.allows("memory_recall")) {
    log.debug(`auto-recall skipped for agent ${agentId}: memory_recall is not allowed in this turn`);
    return undefined;
  }
  const budget = config.hookTimeoutMs;
  // Inside the promise: building the client may fail too (an unreadable TLS file).
  const call = Promise.resolve().then(() =>
    deps.connection().client.buildContext(
      {
        agentId,
        sessionId: sessionIdOf(ctx),
        prompt,
        timeBudgetMs: Math.max(Math.floor(budget / 2), budget - BUDGET_MARGIN_MS),
        ...(config.autoRecallMaxResults === undefined ? {} : { maxResults: config.autoRecallMaxResults }),
        ...(config.autoRecallMinScore === undefined ? {} : { minScore: config.autoRecallMinScore }),
      },
      { timeoutMs: budget },
    ),
  );
  const response = await withinBudget(call, budget).then(
    (r) => {
      reachable(deps);
      return r;
    },
    (error: unknown) => {
      unreachable("auto-recall", error, deps);
      return undefined;
    },
  );
  if (!response) return undefined;
  if (!response.context) {
    log.debug(`auto-recall for agent ${agentId}: no block (${response.skippedReason || "empty"})`);
    return undefined;
  }
  ctx.toolAuthority?.assertActive();
  log.debug(`auto-recall for agent ${agentId}: ${response.results.length} memories`);
  return { prependContext: response.context };
}

/** agent_end: hand the turn's messages to Capture, which keeps what the user asked to keep. */
export async function captureTurn(event: AgentEndEvent, ctx: HookContext, deps: HookDeps): Promise<void> {
  const { config, log } = deps;
  if (!config.autoCapture || !event.success) return;
  const agentId = hookAgentId(ctx, "auto-capture", log);
  if (!agentId || !agentEnabled(config, agentId)) return;
  const messages = turnMessages(Array.isArray(event.messages) ? event.messages : []);
  if (!messages.some((m) => m.role === "user")) return;
  try {
    const response = await withinBudget(
      deps.connection().client.capture(
        { agentId, sessionId: sessionIdOf(ctx), messages },
        { timeoutMs: config.captureTimeoutMs },
      ),
      config.captureTimeoutMs,
    );
    reachable(deps);
    log.debug(
      `auto-capture for agent ${agentId}: ` +
        response.decisions.map((d) => `${messages[d.index]?.role ?? "?"}:${d.reason}`).join(", "),
    );
    if (response.captured.length > 0) {
      log.info(`auto-capture stored ${response.captured.length} memories for agent ${agentId}`);
    }
  } catch (error) {
    unreachable("auto-capture", error, deps);
  }
}

function hookAgentId(ctx: HookContext, what: string, log: PluginLog): string | undefined {
  const agentId = ctx.agentId?.trim();
  if (!agentId) {
    log.once(
      `hook-no-agent:${what}`,
      "warn",
      `${what} skipped: the hook context has no agent id (memoryd never falls back to a shared id)`,
    );
  }
  return agentId || undefined;
}

function sessionIdOf(ctx: HookContext): string {
  return (ctx.sessionId || ctx.sessionKey || "").slice(0, MAX_SESSION_ID_CHARS);
}

function reachable(deps: HookDeps): void {
  if (deps.log.has(DOWN_KEY)) {
    deps.log.reset(DOWN_KEY);
    deps.log.info(`memoryd at ${deps.config.baseUrl} answers again; auto-recall and auto-capture resume`);
  }
}

function unreachable(what: string, error: unknown, deps: HookDeps): void {
  const e = MemorydError.from(error);
  if (e.code === "INVALID_ARGUMENT" || e.code === "PERMISSION_DENIED" || e.code === "NOT_FOUND") {
    // memoryd answered: the request is at fault (e.g. an agent id it refuses), not memoryd.
    deps.log.once(`hook-refused:${what}:${e.code}`, "warn", `${what} refused by memoryd: ${e.code}: ${e.message}`);
    return;
  }
  deps.log.once(
    DOWN_KEY,
    "warn",
    `${what} skipped: memoryd at ${deps.config.baseUrl} is unavailable (${e.code}: ${e.message}); ` +
      "turns go on without memory until it answers again (logged once)",
  );
}

/** `promise`, or a DEADLINE_EXCEEDED rejection after `ms` whatever the transport does. */
function withinBudget<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new MemorydError("DEADLINE_EXCEEDED", `no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
