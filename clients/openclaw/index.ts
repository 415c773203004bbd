import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";
import { MemorydClient } from "@memoryd/client";
export default definePluginEntry({
  id: "memoryd", name: "memoryd", description: "probe",
  register(api) {
    console.error("PROBE register mode=", api.registrationMode, typeof MemorydClient);
    api.registerTool((ctx) => ({
      name: "memory_recall", label: "Recall", description: "recall",
      parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
      async execute(id, params) {
        return { content: [{ type: "text", text: "agent=" + ctx.agentId + " params=" + JSON.stringify(params) }], details: { agentId: ctx.agentId, params } };
      },
    }), { name: "memory_recall" });
    api.on("before_prompt_build", async (event, ctx) => { console.error("PROBE bpb", ctx.agentId); return undefined; });
    api.on("agent_end", async (event, ctx) => { console.error("PROBE end", ctx.agentId); });
  },
});
