// Prints the OpenClaw plugin's six memory tools as JSON ({name: {title, description,
// parameters}}), for tests/e2e/test_mcp.py to compare with `memoryd mcp`'s tools.
// Run with Node >= 24 (type stripping) after scripts/openclaw_setup.sh.
import { createTool, TOOL_NAMES } from "../../clients/openclaw/plugin/src/tools.ts";

const config = { disabledAgents: new Set<string>(), enabledAgents: undefined } as any;
const log = { once() {}, debug() {}, info() {}, warn() {}, error() {} } as any;
const connection = () => {
  throw new Error("no connection: only the tool definitions are read");
};
const tools: Record<string, unknown> = {};
for (const name of TOOL_NAMES) {
  const tool = createTool(name, { agentId: "spec-probe" }, { config, connection, log });
  if (!tool) throw new Error(`${name}: not offered`);
  tools[name] = { title: tool.label, description: tool.description, parameters: tool.parameters };
}
process.stdout.write(JSON.stringify(tools));
