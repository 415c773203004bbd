/**
 * memoryd for OpenClaw: the memory-slot plugin that keeps agents' long-term memory in a
 * memoryd daemon (gRPC) instead of in the gateway process.
 *
 *   tools    memory_recall, memory_store, memory_forget, memory_update, memory_list,
 *            memory_stats                                     (src/tools.ts)
 *   hooks    before_prompt_build -> BuildContext (auto-recall)
 *            agent_end           -> Capture      (auto-capture) (src/hooks.ts)
 *   cli      openclaw memoryd status|search|list|stats          (src/cli.ts)
 *
 * `register()` runs several times per process (discovery, tool discovery, runtime): it
 * only reads the config and registers; the daemon is contacted on the first tool call or
 * hook (src/connection.ts).
 */

import type { AnyAgentTool } from "openclaw/plugin-sdk/plugin-entry";
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";

import { CLI_DESCRIPTOR, registerMemorydCli } from "./src/cli.ts";
import type { MemorydPluginConfig } from "./src/config.ts";
import { ConfigError, parseConfig } from "./src/config.ts";
import { closeAllConnections, connectionFor } from "./src/connection.ts";
import { captureTurn, recallForPrompt } from "./src/hooks.ts";
import { PluginLog } from "./src/log.ts";
import { memoryPromptLines } from "./src/prompt.ts";
import type { ToolDeps } from "./src/tools.ts";
import { createTool, TOOL_NAMES } from "./src/tools.ts";

export const PLUGIN_ID = "memoryd";

export default definePluginEntry({
  id: PLUGIN_ID,
  name: "memoryd",
  description: "Long-term memory for every agent, kept by the memoryd daemon",
  register(api) {
    const log = new PluginLog(api.logger);
    let config: MemorydPluginConfig;
    try {
      config = parseConfig(api.pluginConfig);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      log.once(`config:${error.message}`, "error", `disabled until configured: ${error.message}`);
      return;
    }
    const deps: ToolDeps = { config, connection: () => connectionFor(config), log };

    for (const name of TOOL_NAMES) {
      // A factory: each turn's (or request's) trusted context supplies the agent id. The
      // parameters are plain JSON Schema, which is what OpenClaw's TypeBox schemas are at
      // run time.
      api.registerTool((ctx) => createTool(name, ctx, deps) as AnyAgentTool | null, { name });
    }

    api.registerMemoryCapability({ promptBuilder: (params) => memoryPromptLines(params.availableTools) });

    // Like OpenClaw's memory-lancedb: auto-recall runs after the turn's tool policy is
    // final, and only in turns that may call memory_recall.
    api.on("before_prompt_build", (event, ctx) => recallForPrompt(event, ctx, deps), {
      requiresToolAuthority: true,
      timeoutMs: config.hookTimeoutMs + 500,
    });
    api.on("agent_end", (event, ctx) => captureTurn(event, ctx, deps), {
      timeoutMs: config.captureTimeoutMs + 1_000,
    });
    api.on("gateway_stop", () => closeAllConnections());

    api.registerCli(({ program }) => registerMemorydCli(program, deps), {
      descriptors: [CLI_DESCRIPTOR],
    });
  },
});
