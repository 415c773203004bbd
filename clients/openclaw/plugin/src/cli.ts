/**
 * `openclaw memoryd ...`: an operator's view of one agent's memory through the same tools
 * the agent has (so the output matches what the agent sees).
 *
 *   openclaw memoryd status [--agent <id>] [--json]     daemon address, auth, reachability
 *   openclaw memoryd search <query> --agent <id> [--limit <n>] [--json]
 *   openclaw memoryd list --agent <id> [--limit <n>] [--offset <n>] [--json]
 *   openclaw memoryd stats --agent <id> [--json]
 *
 * `--agent` is required where memories are read: the CLI never guesses an agent.
 */

import type { ToolDeps, ToolName, ToolResult } from "./tools.ts";
import { createTool } from "./tools.ts";

/** The commander surface used here (OpenClaw passes its own Command). */
interface CommandLike {
  command(name: string): CommandLike;
  description(text: string): CommandLike;
  argument(name: string, description?: string, defaultValue?: unknown): CommandLike;
  option(flags: string, description?: string, defaultValue?: string): CommandLike;
  requiredOption(flags: string, description?: string): CommandLike;
  // commander passes the positional arguments, then the options object.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  action(fn: (...args: any[]) => void | Promise<void>): CommandLike;
}

interface Flags {
  agent?: string;
  limit?: string;
  offset?: string;
  json?: boolean;
}

export const CLI_DESCRIPTOR = {
  name: "memoryd",
  description: "Inspect long-term memory kept by memoryd (status, search, list, stats)",
  hasSubcommands: true,
} as const;

export function registerMemorydCli(program: CommandLike, deps: ToolDeps): void {
  const root = program.command("memoryd").description(CLI_DESCRIPTOR.description);

  root
    .command("status")
    .description("Show the daemon address and whether it answers")
    .option("--agent <id>", "agent whose view to check (default: none, address only)")
    .option("--json", "print JSON")
    .action(async (flags: Flags) => {
      const status: Record<string, unknown> = {
        address: deps.config.baseUrl,
        token: deps.config.tokenSource,
        clientCertificate: deps.config.tlsCertFile ?? "none",
        autoRecall: deps.config.autoRecall,
        autoCapture: deps.config.autoCapture,
      };
      if (flags.agent) {
        const r = await runTool("memory_stats", flags.agent, {}, deps);
        status.reachable = r.details.status === undefined;
        status.stats = r.details;
      }
      print(flags, status, Object.entries(status).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join("\n"));
    });

  root
    .command("search")
    .description("Recall the memories most relevant to a query")
    .argument("<query>", "what to look for")
    .requiredOption("--agent <id>", "agent whose memories to search")
    .option("--limit <n>", "most results", "5")
    .option("--json", "print JSON")
    .action(async (query: string, flags: Flags) => {
      const r = await runTool("memory_recall", flags.agent!, { query, limit: flags.limit }, deps);
      print(flags, r.details, text(r));
    });

  root
    .command("list")
    .description("List memories, newest first")
    .requiredOption("--agent <id>", "agent whose memories to list")
    .option("--limit <n>", "memories per page", "10")
    .option("--offset <n>", "memories to skip", "0")
    .option("--json", "print JSON")
    .action(async (flags: Flags) => {
      const r = await runTool("memory_list", flags.agent!, { limit: flags.limit, offset: flags.offset }, deps);
      // The tool tells a model to call memory_list again; here the next page is a flag.
      const { hasMore, offset, count } = r.details as { hasMore?: boolean; offset?: number; count?: number };
      const next = hasMore ? `More: --offset ${(offset ?? 0) + (count ?? 0)}.` : "";
      print(flags, r.details, text(r).replace(/More: call memory_list with offset \d+\./, next));
    });

  root
    .command("stats")
    .description("Counts by scope and category, embedding model")
    .requiredOption("--agent <id>", "agent whose view to count")
    .option("--json", "print JSON")
    .action(async (flags: Flags) => {
      const r = await runTool("memory_stats", flags.agent!, {}, deps);
      print(flags, r.details, text(r));
    });
}

async function runTool(name: ToolName, agentId: string, args: Record<string, unknown>, deps: ToolDeps): Promise<ToolResult> {
  const tool = createTool(name, { agentId }, deps);
  if (!tool) throw new Error(`memoryd is disabled for agent ${agentId} (enabledAgents / disabledAgents)`);
  const result = await tool.execute(`cli-${Date.now()}`, args);
  if (result.details.status === "unavailable" || result.details.status === "timeout") process.exitCode = 1;
  return result;
}

function text(result: ToolResult): string {
  return result.content.map((c) => c.text).join("\n");
}

function print(flags: Flags, json: unknown, plain: string): void {
  process.stdout.write(`${flags.json ? JSON.stringify(json, null, 2) : plain}\n`);
}
