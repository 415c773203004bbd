/**
 * The plugin inside a real OpenClaw (the pinned dev dependency), offline:
 *
 *   1. `openclaw plugins inspect memoryd --runtime --json` shows it loaded, with every
 *      tool and hook, without contacting memoryd;
 *   2. a gateway (`openclaw gateway run`) runs each tool through `POST /tools/invoke`
 *      against a real memoryd (with a keys file; the plugin holds an API key for some
 *      agents), one agent cannot read, change or delete another's memories through it, and
 *      an agent outside the key is refused;
 *   3. `openclaw agent` turns through the gateway against a scripted OpenAI-compatible
 *      model: a memory captured in turn 1 is in turn 2's prompt as <relevant-memories>,
 *      a scripted memory_store tool call stores under the turn's agent;
 *   4. with memoryd stopped, tools answer "unavailable", turns still complete, and the
 *      outage is logged once.
 *
 * Everything listens on 127.0.0.1; every process has a deadline and is killed in after().
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { MemorydClient } from "@memoryd/client";

import { TOOL_NAMES } from "../plugin/src/tools.ts";
import type { Daemon } from "./helpers/memoryd.ts";
import { startMemoryd } from "./helpers/memoryd.ts";
import type { ChatRequest, ModelServer } from "./helpers/model-server.ts";
import { contentText, startModelServer } from "./helpers/model-server.ts";
import type { Gateway, InvokeResult } from "./helpers/openclaw.ts";
import { freePort, OpenClawHome } from "./helpers/openclaw.ts";
import { PLUGIN_DIR, REPO_ROOT } from "./helpers/paths.ts";

// memoryd runs with a keys file: the gateway's API key acts for the agents below (not
// delta); the operator key is the test's own view of the daemon.
const GATEWAY_KEY = "mk_gateway-key-for-the-openclaw-tests";
const OPERATOR_KEY = "mk_operator-key-for-the-openclaw-tests";
const sha256 = (secret: string): string => createHash("sha256").update(secret).digest("hex");
const KEYS_FILE = `
[[key]]
name = "openclaw-gateway"
sha256 = "${sha256(GATEWAY_KEY)}"
agents = ["alpha", "beta", "gamma", "chat*"]

[[key]]
name = "ops"
sha256 = "${sha256(OPERATOR_KEY)}"
agents = ["*"]
operator = true
`;
const GATEWAY_TOKEN = "gateway-test-token";

/** Five memories, a question about the first and a word it holds, in each of the six
 * languages of the capture rules (shared with tests/integration/test_multilingual.py). */
const SIX_LANGUAGES = JSON.parse(readFileSync(join(REPO_ROOT, "tests/data/six_languages.json"), "utf8")) as Record<
  string,
  { memories: string[]; question: string; word: string }
>;
const MINUTE = 60_000;

/** The user messages of a model request, as text. */
function userTexts(request: ChatRequest): string[] {
  return request.messages.filter((m) => m.role === "user").map((m) => contentText(m.content));
}

/** The agent-turn request (one offering tools) whose user messages contain `marker`. */
function requestWith(model: ModelServer, marker: string): ChatRequest {
  const found = model.requests.filter((r) => (r.tools?.length ?? 0) > 0 && userTexts(r).some((t) => t.includes(marker)));
  assert.ok(found.length > 0, `the model never saw "${marker}"`);
  return found.at(-1)!;
}

/** The user message of `request` that contains `marker`. */
function userMessageWith(request: ChatRequest, marker: string): string {
  return userTexts(request).findLast((t) => t.includes(marker))!;
}

/** The tools test: the details of a 200 answer, or a failure showing the whole answer. */
function ok(answer: InvokeResult): Record<string, unknown> {
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.ok(answer.body.ok && answer.body.result, JSON.stringify(answer.body));
  return answer.body.result.details;
}

function text(answer: InvokeResult): string {
  return answer.body.result?.content.map((c) => c.text).join("\n") ?? "";
}

function memoryIds(details: Record<string, unknown>): string[] {
  return ((details.memories as { id: string }[] | undefined) ?? []).map((m) => m.id);
}

describe("the memoryd plugin in OpenClaw", () => {
  let daemon: Daemon;
  let model: ModelServer;
  let home: OpenClawHome;
  let gatewayPort: number;
  let keysDir: string | undefined;

  /** The openclaw.json of every test; `memorydAddress` is where the plugin connects. */
  function config(memorydAddress: string): unknown {
    return {
      gateway: { mode: "local", port: gatewayPort, bind: "loopback", auth: { mode: "token", token: GATEWAY_TOKEN } },
      logging: { file: home.logFile, level: "debug" },
      models: {
        providers: {
          scripted: {
            baseUrl: model.baseUrl,
            apiKey: "scripted-key",
            api: "openai-completions",
            models: [
              {
                id: "scripted-1",
                name: "Scripted",
                reasoning: false,
                input: ["text"],
                contextWindow: 128_000,
                maxTokens: 4096,
                cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
              },
            ],
          },
        },
      },
      agents: {
        defaults: { model: { primary: "scripted/scripted-1" } },
        // alpha owns memories, beta tries to reach them, gamma has memory turned off,
        // chat and chat2 hold conversations, delta is outside the gateway's API key.
        entries: {
          alpha: {},
          beta: {},
          gamma: {},
          chat: {},
          chat2: {},
          delta: {},
          // one conversation agent per language of the six-language test
          ...Object.fromEntries(Object.keys(SIX_LANGUAGES).map((lang) => [`chat-${lang}`, {}])),
        },
        ownership: "explicit",
      },
      tools: { toolSearch: false },
      plugins: {
        load: { paths: [PLUGIN_DIR] },
        slots: { memory: "memoryd" },
        entries: {
          memoryd: {
            enabled: true,
            hooks: { allowConversationAccess: true },
            // A generous tool deadline: a Store embeds on a shared 2-core machine.
            config: { address: memorydAddress, disabledAgents: ["gamma"], toolTimeoutMs: 20_000 },
          },
        },
      },
    };
  }

  before(
    async () => {
      [daemon, model, home, gatewayPort] = await Promise.all([
        (async () => {
          keysDir = await mkdtemp(join(tmpdir(), "memoryd-openclaw-keys-"));
          await writeFile(join(keysDir, "keys.toml"), KEYS_FILE);
          return startMemoryd({ env: { MEMORYD_AUTH__KEYS_FILE: join(keysDir, "keys.toml") } });
        })(),
        startModelServer((request) => {
          // After a tool result the turn is done (OpenClaw may append context after it).
          if (request.messages.some((m) => m.role === "tool")) return { text: "Done." };
          if (userTexts(request).some((t) => t.includes("Please save that my cat is called Miso"))) {
            return {
              toolCalls: [{ name: "memory_store", arguments: { text: "The user's cat is called Miso", category: "fact" } }],
            };
          }
          return { text: "OK" };
        }),
        OpenClawHome.create(),
        freePort(),
      ]);
    },
    { timeout: 4 * MINUTE },
  );

  after(async () => {
    await Promise.allSettled([model?.close(), daemon?.stop()]);
    await home?.dispose();
    if (keysDir) await rm(keysDir, { recursive: true, force: true });
  });

  it("plugins inspect --runtime: loaded, owns the memory slot, every tool and hook, no connection made", { timeout: 4 * MINUTE }, async () => {
    // Point the plugin at a listener that counts connections: loading must not connect.
    let connections = 0;
    const counter = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    counter.listen(0, "127.0.0.1");
    await once(counter, "listening");
    try {
      const port = (counter.address() as { port: number }).port;
      await home.writeConfig(config(`127.0.0.1:${port}`));
      const run = await home.run(["plugins", "inspect", "memoryd", "--runtime", "--json"], {
        timeoutMs: 3 * MINUTE,
        env: { MEMORYD_AUTH_TOKEN: GATEWAY_KEY },
      });
      assert.equal(run.code, 0, run.stderr);
      const report = JSON.parse(run.stdout.slice(run.stdout.indexOf("{"))) as {
        plugin: Record<string, unknown> & { contracts: { tools: string[] } };
        typedHooks: { name: string }[];
        tools: { names: string[]; optional: boolean }[];
        cliCommands: string[];
        diagnostics: { level: string; message: string }[];
      };
      const plugin = report.plugin;
      assert.equal(plugin.id, "memoryd");
      assert.equal(plugin.status, "loaded");
      assert.equal(plugin.imported, true);
      assert.equal(plugin.kind, "memory");
      assert.equal(plugin.memorySlotSelected, true);
      assert.deepEqual([...(plugin.toolNames as string[])].sort(), [...TOOL_NAMES].sort());
      assert.deepEqual([...plugin.contracts.tools].sort(), [...TOOL_NAMES].sort());
      assert.deepEqual(report.tools.flatMap((t) => t.names).sort(), [...TOOL_NAMES].sort());
      assert.ok(report.tools.every((t) => !t.optional));
      const hooks = report.typedHooks.map((h) => h.name);
      assert.ok(hooks.includes("before_prompt_build"), hooks.join(", "));
      assert.ok(hooks.includes("agent_end"), hooks.join(", "));
      assert.ok(report.cliCommands.includes("memoryd"));
      assert.deepEqual(
        report.diagnostics.filter((d) => d.level === "error"),
        [],
      );
      assert.equal(connections, 0, "loading the plugin connected to memoryd");
    } finally {
      counter.close();
    }
  });

  describe("through a gateway", () => {
    let gateway: Gateway;

    before(
      async () => {
        await home.writeConfig(config(daemon.address));
        gateway = await home.startGateway({
          port: gatewayPort,
          token: GATEWAY_TOKEN,
          env: { MEMORYD_AUTH_TOKEN: GATEWAY_KEY },
          timeoutMs: 4 * MINUTE,
          // Ready once the plugin's tools answer (plugin loaded, memoryd reachable).
          ready: async (g) => (await g.invoke("memory_stats", "alpha")).status === 200,
        });
      },
      { timeout: 5 * MINUTE },
    );

    after(async () => {
      await gateway?.stop();
    });

    /** `openclaw agent` through the gateway; the turn must complete. */
    async function turn(agent: string, sessionId: string, message: string): Promise<void> {
      const run = await home.run(["agent", "--agent", agent, "--session-id", sessionId, "--message", message, "--json"], {
        timeoutMs: 3 * MINUTE,
      });
      assert.equal(
        run.code,
        0,
        `openclaw agent failed:\n${run.stdout}\n${run.stderr}\n--- gateway output (tail):\n${gateway.output().slice(-6000)}`,
      );
      const reply = JSON.parse(run.stdout.slice(run.stdout.indexOf("{"))) as { status?: string };
      assert.equal(reply.status, "ok", run.stdout);
    }

    it("runs each tool through POST /tools/invoke", { timeout: 2 * MINUTE }, async () => {
      const stored = ok(
        await gateway.invoke("memory_store", "alpha", {
          text: "The user prefers dark mode in every editor",
          category: "preference",
          importance: 0.9,
        }),
      );
      assert.equal(stored.outcome, "created");
      const id = stored.id as string;
      assert.match(id, /^[0-9a-f-]{36}$/);
      assert.equal((stored.memory as { scope: string }).scope, "agent:alpha");

      const again = ok(await gateway.invoke("memory_store", "alpha", { text: "The user prefers dark mode in every editor" }));
      assert.equal(again.outcome, "duplicate");
      assert.equal(again.id, id);

      const recalled = await gateway.invoke("memory_recall", "alpha", { query: "which editor theme does the user like?" });
      assert.deepEqual(memoryIds(ok(recalled)), [id]);
      assert.match(text(recalled), /^Found 1 memories:/);
      assert.match(text(recalled), /untrusted historical data/);

      const updated = ok(
        await gateway.invoke("memory_update", "alpha", { memoryId: id, text: "The user prefers light mode in every editor" }),
      );
      assert.equal((updated.memory as { text: string }).text, "The user prefers light mode in every editor");

      const listed = ok(await gateway.invoke("memory_list", "alpha", { limit: 10 }));
      assert.equal(listed.total, 1);
      assert.deepEqual(memoryIds(listed), [id]);

      const stats = ok(await gateway.invoke("memory_stats", "alpha"));
      assert.equal(stats.total, 1);
      assert.deepEqual(stats.byScope, { "agent:alpha": 1 });
      assert.equal(stats.embeddingDim, 384);

      const full = ok(await gateway.invoke("memory_recall", "alpha", { query: "editor theme", full_text: true, category: "preference" }));
      assert.deepEqual(memoryIds(full), [id]);

      const temporary = ok(
        await gateway.invoke("memory_store", "alpha", { text: "The user is in Lisbon this week", ttl: "session" }),
      );
      const expires = Date.parse((temporary.memory as { expiresAt: string }).expiresAt);
      assert.ok(expires > Date.now() + 20 * 3600_000 && expires < Date.now() + 28 * 3600_000, String(temporary.memory));
      assert.deepEqual(ok(await gateway.invoke("memory_forget", "alpha", { memoryId: temporary.id })).deleted, [temporary.id]);

      const second = ok(await gateway.invoke("memory_store", "alpha", { text: "Deploys happen on Fridays at 5pm", ttl: "permanent" }));
      assert.equal((second.memory as { expiresAt: string | null }).expiresAt, null);
      const byQuery = ok(await gateway.invoke("memory_forget", "alpha", { query: "Deploys happen on Fridays at 5pm" }));
      assert.deepEqual(byQuery.deleted, [second.id]);

      const byId = ok(await gateway.invoke("memory_forget", "alpha", { memoryId: id }));
      assert.deepEqual(byId.deleted, [id]);
      assert.equal(ok(await gateway.invoke("memory_stats", "alpha")).total, 0);
    });

    it("refuses bad arguments with HTTP 400 and a message saying what to fix", { timeout: MINUTE }, async () => {
      const cases: [string, unknown, RegExp][] = [
        ["memory_recall", {}, /memory_recall: query is required/],
        ["memory_recall", { query: "x", limit: 500 }, /limit must be a whole number from 1 to 50, got 500/],
        ["memory_recall", { query: "x", q: "y" }, /unknown argument q/],
        ["memory_store", { text: "x", importance: 2 }, /importance must be a number from 0 to 1, got 2/],
        ["memory_store", { text: "Remember this", category: "mood" }, /category must be one of preference, fact, decision, entity, other/],
        ["memory_store", { text: "x".repeat(20_000) }, /memory_store: text is 20000 chars; the limit is 10000/],
        ["memory_forget", { memoryId: "0c4f3a40-0000-4000-8000-000000000000", query: "x" }, /exactly one of memoryId or query/],
        ["memory_forget", { memoryId: "not-an-id" }, /is not a memory id/],
        ["memory_update", { memoryId: "0c4f3a40-0000-4000-8000-000000000000" }, /at least one of text, importance or category/],
        ["memory_list", { offset: -1 }, /offset must be a whole number from 0/],
      ];
      for (const [tool, args, message] of cases) {
        const answer = await gateway.invoke(tool, "alpha", args);
        assert.equal(answer.status, 400, `${tool} ${JSON.stringify(args)}: ${JSON.stringify(answer.body)}`);
        assert.match(answer.body.error?.message ?? "", message);
      }
      // Nothing was stored by any of them.
      assert.equal(ok(await gateway.invoke("memory_stats", "alpha")).total, 0);
    });

    it("keeps agents apart: beta cannot recall, list, change or forget alpha's memory", { timeout: 2 * MINUTE }, async () => {
      const secret = ok(await gateway.invoke("memory_store", "alpha", { text: "The launch code word is pelican" }));
      const id = secret.id as string;

      const recall = ok(await gateway.invoke("memory_recall", "beta", { query: "launch code word pelican" }));
      assert.deepEqual(memoryIds(recall), []);
      const list = ok(await gateway.invoke("memory_list", "beta"));
      assert.equal(list.total, 0);
      assert.equal(ok(await gateway.invoke("memory_stats", "beta")).total, 0);

      const forgetById = await gateway.invoke("memory_forget", "beta", { memoryId: id });
      assert.deepEqual(ok(forgetById).deleted, []);
      assert.match(text(forgetById), /No memory with id/);
      const forgetByQuery = ok(await gateway.invoke("memory_forget", "beta", { query: "The launch code word is pelican" }));
      assert.deepEqual(forgetByQuery.deleted, []);
      assert.deepEqual(forgetByQuery.candidates, []);
      const update = await gateway.invoke("memory_update", "beta", { memoryId: id, text: "The launch code word is parrot" });
      assert.equal(update.status, 400);
      assert.match(update.body.error?.message ?? "", /no memory with id .* that this agent can see/);
      // beta may not read alpha's private scope even by naming it.
      const scoped = await gateway.invoke("memory_recall", "beta", { query: "launch code", scope: "agent:alpha" });
      assert.equal(scoped.status, 403, JSON.stringify(scoped.body));

      // gamma has memory turned off: the tools are not offered at all.
      assert.equal((await gateway.invoke("memory_recall", "gamma", { query: "launch code" })).status, 404);

      // alpha's memory is untouched.
      const mine = ok(await gateway.invoke("memory_recall", "alpha", { query: "launch code word" }));
      assert.deepEqual(memoryIds(mine), [id]);
      assert.equal((mine.memories as { text: string }[])[0]!.text, "The launch code word is pelican");
    });

    it("the gateway's API key: refused for an agent outside it, by every tool and both hooks", { timeout: 4 * MINUTE }, async () => {
      for (const [tool, args] of [
        ["memory_store", { text: "Delta's locker code is 4321" }],
        ["memory_recall", { query: "locker code" }],
        ["memory_list", {}],
        ["memory_stats", {}],
        ["memory_forget", { query: "locker code" }],
        ["memory_update", { memoryId: "0c4f3a40-0000-4000-8000-000000000000", text: "Delta's locker code is 1234" }],
      ] as const) {
        const answer = await gateway.invoke(tool, "delta", args);
        assert.equal(answer.status, 403, `${tool}: ${JSON.stringify(answer.body)}`);
        assert.match(answer.body.error?.message ?? "", /credential 'openclaw-gateway' may not act for agent 'delta'/);
      }
      // A turn as delta completes, without memories, and nothing is captured for it.
      await turn("delta", "delta-1", "Remember that my locker code is 4321");
      const refusals = (await home.pluginLog()).filter((l) => /auto-(recall|capture) refused by memoryd: PERMISSION_DENIED/.test(l.message));
      for (const hook of ["auto-recall", "auto-capture"]) {
        assert.ok(refusals.some((l) => l.message.includes(hook)), `${hook}: ${JSON.stringify(await home.pluginLog(), null, 1)}`);
      }
      const ops = new MemorydClient({ address: `http://${daemon.address}`, token: OPERATOR_KEY });
      try {
        assert.equal((await ops.stats({ agentId: "delta" })).total, 0n);
        // The same key still serves its own agents: the gateway sees what alpha has.
        const alpha = (await ops.stats({ agentId: "alpha" })).total;
        assert.ok(alpha > 0n);
        assert.equal(BigInt(ok(await gateway.invoke("memory_stats", "alpha")).total as number), alpha);
      } finally {
        ops.close();
      }
    });

    it("answers `openclaw memoryd search` for the agent named, and only for it", { timeout: 3 * MINUTE }, async () => {
      const run = await home.run(["memoryd", "search", "launch code word", "--agent", "alpha", "--json"], {
        timeoutMs: 3 * MINUTE,
        env: { MEMORYD_AUTH_TOKEN: GATEWAY_KEY },
      });
      assert.equal(run.code, 0, run.stderr);
      const details = JSON.parse(run.stdout.slice(run.stdout.indexOf("{"))) as { memories: { text: string }[] };
      assert.deepEqual(
        details.memories.map((m) => m.text),
        ["The launch code word is pelican"],
      );
    });

    it("captures a memory in turn 1 and puts it in turn 2's prompt as <relevant-memories>", { timeout: 6 * MINUTE }, async () => {
      await turn("chat", "colour-1", "Remember that my favourite colour is teal");
      const first = userMessageWith(requestWith(model, "Remember that my favourite colour is teal"), "favourite colour is teal");
      assert.doesNotMatch(first, /<relevant-memories>/);

      // The capture happened under the turn's agent, and only there.
      const listed = ok(await gateway.invoke("memory_list", "chat"));
      assert.ok(
        (listed.memories as { text: string }[]).some((m) => /favourite colour is teal/.test(m.text)),
        JSON.stringify(listed),
      );
      assert.equal(ok(await gateway.invoke("memory_stats", "chat2")).total, 0);

      await turn("chat", "colour-2", "What is my favourite colour?");
      const second = userMessageWith(requestWith(model, "What is my favourite colour?"), "What is my favourite colour?");
      const block = /<relevant-memories>[\s\S]*?<\/relevant-memories>/.exec(second);
      assert.ok(block, `no <relevant-memories> block in turn 2's prompt:\n${second}`);
      assert.match(block[0], /favourite colour is teal/);
      assert.match(block[0], /untrusted historical data/);
      // The memory section of the system prompt (the plugin's memory capability).
      const system = requestWith(model, "What is my favourite colour?").messages.find((m) => m.role === "system");
      assert.match(contentText(system?.content), /## Long-term memory[\s\S]*- memory_recall: /);

      // Another agent asking the same question gets none of chat's memories.
      await turn("chat2", "colour-3", "What is my favourite colour, chat2 asking?");
      const other = userMessageWith(requestWith(model, "chat2 asking"), "chat2 asking");
      assert.doesNotMatch(other, /teal/);
    });

    it("stores and recalls in six languages: memory_recall, and the next turn's <relevant-memories>", { timeout: 8 * MINUTE }, async () => {
      for (const [lang, { memories, question, word }] of Object.entries(SIX_LANGUAGES)) {
        const agent = `chat-${lang}`;
        const ids: string[] = [];
        for (const memory of memories) {
          const stored = ok(await gateway.invoke("memory_store", agent, { text: memory }));
          assert.equal(stored.outcome, "created", `${lang}: ${JSON.stringify(stored)}`);
          ids.push(stored.id as string);
        }
        const recalled = ok(await gateway.invoke("memory_recall", agent, { query: question }));
        assert.equal(memoryIds(recalled)[0], ids[0], `${lang}: ${JSON.stringify(recalled)}`);

        await turn(agent, `lang-${lang}`, question);
        const prompt = userMessageWith(requestWith(model, question), question);
        const block = /<relevant-memories>[\s\S]*?<\/relevant-memories>/.exec(prompt);
        assert.ok(block, `${lang}: no <relevant-memories> block in the turn's prompt:\n${prompt}`);
        assert.ok(block[0].includes(word), `${lang}: "${word}" is not in\n${block[0]}`);
      }
    });

    it("runs a scripted memory_store tool call under the turn's agent", { timeout: 3 * MINUTE }, async () => {
      await turn("chat2", "cat-1", "Please save that my cat is called Miso");
      const followUp = model.requests.find((r) => r.messages.some((m) => m.role === "tool"));
      assert.ok(followUp, "the model never received the tool result");
      const result = contentText(followUp.messages.find((m) => m.role === "tool")!.content);
      assert.match(result, /Stored memory [0-9a-f-]{36} \[fact\] in agent:chat2/);
      const recalled = ok(await gateway.invoke("memory_recall", "chat2", { query: "what is the cat called?" }));
      assert.ok((recalled.memories as { text: string }[]).some((m) => m.text === "The user's cat is called Miso"));
      const elsewhere = ok(await gateway.invoke("memory_recall", "chat", { query: "what is the cat called?" }));
      assert.ok(!(elsewhere.memories as { text: string }[]).some((m) => /Miso/.test(m.text)), JSON.stringify(elsewhere));
    });

    it("with memoryd stopped: tools answer 'unavailable', turns complete, the outage is logged once", { timeout: 6 * MINUTE }, async () => {
      await daemon.stop();

      const answer = await gateway.invoke("memory_recall", "alpha", { query: "launch code" });
      const details = ok(answer);
      assert.equal(details.status, "unavailable");
      assert.match(text(answer), new RegExp(`memoryd at http://${daemon.address.replace(/\./g, "\\.")} is unavailable`));

      await turn("chat", "down-1", "Remember that I am allergic to peanuts, first try");
      await turn("chat", "down-2", "What am I allergic to, second try?");
      const prompt = userMessageWith(requestWith(model, "second try"), "second try");
      assert.doesNotMatch(prompt, /<relevant-memories>/);

      const outage = (await home.pluginLog()).filter(
        (line) => line.level === "warn" && /auto-(recall|capture) skipped: memoryd at .* is unavailable/.test(line.message),
      );
      assert.equal(outage.length, 1, JSON.stringify(await home.pluginLog(), null, 1));
    });
  });
});
