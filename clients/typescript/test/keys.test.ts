/**
 * API keys (the daemon's keys file) through the client: a tenant key acts for its own
 * agents only, an operator key for every agent and daemon-wide; a wrong key is refused.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import type { ImportResponse, Memory } from "../src/index.js";
import { MemorydClient, MemorydError, StoreOutcome } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

const TENANT_KEY = "mk_tenant-a-key-for-the-ts-tests";
const OPERATOR_KEY = "mk_operator-key-for-the-ts-tests";

const sha256 = (secret: string): string => createHash("sha256").update(secret).digest("hex");

const KEYS_FILE = `
[[key]]
name = "gateway-a"
sha256 = "${sha256(TENANT_KEY)}"
agents = ["tenant-a-*"]

[[key]]
name = "ops"
sha256 = "${sha256(OPERATOR_KEY)}"
agents = ["*"]
operator = true
`;

/** The MemorydError `promise` rejects with (fails the test if it resolves). */
async function refusal(promise: Promise<unknown>, what = "the call"): Promise<MemorydError> {
  const error = await promise.then(
    (value) => assert.fail(`${what} succeeded: ${String(value)}`),
    (reason: unknown) => reason,
  );
  assert.ok(error instanceof MemorydError, String(error));
  return error;
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("API keys", () => {
  let daemon: Daemon;
  let dir: string;
  const clients: MemorydClient[] = [];
  const connect = (token?: string): MemorydClient => {
    const client = new MemorydClient({ address: daemon.address, ...(token === undefined ? {} : { token }) });
    clients.push(client);
    return client;
  };
  let tenant: MemorydClient;
  let operator: MemorydClient;
  let bSecret: Memory;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "memoryd-ts-keys-"));
    const keysFile = join(dir, "keys.toml");
    await writeFile(keysFile, KEYS_FILE);
    daemon = await startDaemon({ env: { MEMORYD_AUTH__KEYS_FILE: keysFile } });
    tenant = connect(TENANT_KEY);
    operator = connect(OPERATOR_KEY);
    // tenant-b-1's memory, stored by the operator: the tenant key must not reach it.
    bSecret = (await operator.store({ agentId: "tenant-b-1", text: "Tenant B's launch code word is heron" })).memory!;
  });

  after(async () => {
    for (const client of clients) client.close();
    if (daemon) assert.equal(await daemon.stop(), 0, `memoryd did not exit cleanly on SIGTERM:\n${daemon.log()}`);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("the tenant key works for its own agent: every RPC, a Stream session and both hooks", async () => {
    const agentId = "tenant-a-1";
    const stored = await tenant.store({ agentId, text: "Tenant A deploys on Tuesdays" });
    const id = stored.memory!.id;
    assert.equal((await tenant.get({ agentId, id })).text, "Tenant A deploys on Tuesdays");
    assert.deepEqual((await tenant.recall({ agentId, query: "when does tenant A deploy?" })).results.map((r) => r.memory!.id), [id]);
    assert.deepEqual((await tenant.list({ agentId })).memories.map((m) => m.id), [id]);
    assert.equal((await tenant.stats({ agentId })).total, 1n);
    await tenant.update({ agentId, id, text: "Tenant A deploys on Wednesdays" });
    assert.deepEqual((await collect(tenant.export({ agentId }))).map((m) => m.text), ["Tenant A deploys on Wednesdays"]);
    assert.deepEqual(await tenant.listConflicts({ agentId }), []);

    const session = tenant.stream();
    const streamed = await session.store({ agentId, text: "Tenant A's standup is at 9:30" });
    assert.ok((await session.recall({ agentId, query: "standup time" })).results.some((r) => r.memory!.id === streamed.memory!.id));
    await session.close();

    const turn = await tenant.capture({
      agentId,
      sessionId: "s-a",
      messages: [{ role: "user", text: "Remember that my favourite colour is teal" }],
    });
    assert.equal(turn.captured.length, 1, JSON.stringify(turn.decisions));
    const context = await tenant.buildContext({ agentId, sessionId: "s-a", prompt: "What is my favourite colour?" });
    assert.match(context.context, /teal/);

    assert.deepEqual((await tenant.forget({ agentId, id })).deletedIds, [id]);
  });

  it("the tenant key is PERMISSION_DENIED for another tenant's agent on every RPC, Stream op and hook", async () => {
    const agentId = "tenant-b-1";
    const id = bSecret.id;
    const calls: [string, () => Promise<unknown>][] = [
      ["store", () => tenant.store({ agentId, text: "Tenant A writing into B" })],
      ["recall", () => tenant.recall({ agentId, query: "launch code word" })],
      ["get", () => tenant.get({ agentId, id })],
      ["list", () => tenant.list({ agentId })],
      ["stats", () => tenant.stats({ agentId })],
      ["update", () => tenant.update({ agentId, id, text: "Tenant B's launch code word is parrot" })],
      ["forget by id", () => tenant.forget({ agentId, id })],
      ["forget by query", () => tenant.forget({ agentId, query: "Tenant B's launch code word is heron" })],
      ["listConflicts", () => tenant.listConflicts({ agentId })],
      ["export", () => collect(tenant.export({ agentId }))],
      ["buildContext", () => tenant.buildContext({ agentId, sessionId: "s-b", prompt: "What is the launch code word?" })],
      [
        "capture",
        () => tenant.capture({ agentId, sessionId: "s-b", messages: [{ role: "user", text: "Remember that the code word is parrot" }] }),
      ],
    ];
    for (const [name, call] of calls) {
      const error = await refusal(call(), name);
      assert.equal(error.code, "PERMISSION_DENIED", `${name}: ${error.message}`);
      assert.doesNotMatch(error.message, /heron/, name);
    }

    // Import answers per memory: every one refused with PERMISSION_DENIED, none imported.
    // (Should the daemon refuse the whole call instead, that is PERMISSION_DENIED too.)
    const planted = { id: "0c4f3a40-0000-4000-8000-000000000001", scope: "agent:tenant-b-1", text: "Planted by A" };
    const imported = await tenant
      .importMemories({ agentId, memories: [planted, { ...planted, id: id, text: "Overwritten by A" }] })
      .catch((reason: unknown) => reason);
    if (imported instanceof MemorydError) {
      assert.equal(imported.code, "PERMISSION_DENIED", imported.message);
    } else {
      const r = imported as ImportResponse;
      assert.equal(r.imported + r.skippedExisting, 0n);
      assert.deepEqual(
        r.errors.map((e) => e.codeName),
        ["PERMISSION_DENIED", "PERMISSION_DENIED"],
      );
      assert.equal(r.errors[0]!.message.replace(planted.id, "X"), r.errors[1]!.message.replace(id, "X"));
    }

    // Stream ops: each op is refused on its own, and the session goes on.
    const session = tenant.stream();
    const ops: [string, Promise<unknown>][] = [
      ["stream store", session.store({ agentId, text: "Tenant A streaming into B" })],
      ["stream recall", session.recall({ agentId, query: "launch code word" })],
      ["stream update", session.update({ agentId, id, text: "Tenant B's launch code word is parrot" })],
      ["stream forget", session.forget({ agentId, target: { case: "id", value: id } })],
    ];
    for (const [name, op] of ops) assert.equal((await refusal(op, name)).code, "PERMISSION_DENIED", name);
    const goesOn = await session.store({ agentId: "tenant-a-1", text: "Tenant A's session goes on after refusals" });
    assert.equal(goesOn.outcome, StoreOutcome.CREATED);
    await session.close();

    // Nothing of tenant-b-1 changed, and nothing was written there.
    assert.equal((await operator.get({ agentId, id })).text, "Tenant B's launch code word is heron");
    assert.equal((await operator.stats({ agentId })).total, 1n);
  });

  it("a refusal says the same whether or not the other agent has memories", async () => {
    const withMemories = await refusal(tenant.recall({ agentId: "tenant-b-1", query: "launch code word" }));
    const empty = await refusal(tenant.recall({ agentId: "tenant-b-2", query: "launch code word" }));
    assert.equal(withMemories.code, empty.code);
    assert.equal(withMemories.message.replace("tenant-b-1", "X"), empty.message.replace("tenant-b-2", "X"));
  });

  it("the operator key: daemonWide stats and allScopes export; the tenant key: PERMISSION_DENIED for both", async () => {
    await operator.store({ agentId: "tenant-a-2", text: "Tenant A2 keeps a garden" });
    const own = await operator.stats({ agentId: "tenant-a-2" });
    const wide = await operator.stats({ agentId: "tenant-a-2", daemonWide: true });
    assert.equal(own.storeRows, 1n);
    assert.ok(wide.storeRows > own.storeRows, `daemon-wide ${wide.storeRows} rows, tenant-a-2's own ${own.storeRows}`);
    assert.ok(wide.indexBytes > own.indexBytes);

    const all = await collect(operator.export({ agentId: "ops-console", allScopes: true }));
    const texts = all.map((m) => m.text);
    assert.ok(texts.includes("Tenant B's launch code word is heron"), texts.join(" | "));
    assert.ok(texts.includes("Tenant A2 keeps a garden"), texts.join(" | "));

    assert.equal((await refusal(tenant.stats({ agentId: "tenant-a-1", daemonWide: true }))).code, "PERMISSION_DENIED");
    const exportAll = await refusal(collect(tenant.export({ agentId: "tenant-a-1", allScopes: true })));
    assert.equal(exportAll.code, "PERMISSION_DENIED");
    assert.match(exportAll.message, /operator/);
  });

  it("a wrong key, or none, is UNAUTHENTICATED, and nothing is written", async () => {
    for (const client of [connect("mk_not-a-key-the-daemon-knows"), connect()]) {
      assert.equal((await refusal(client.store({ agentId: "tenant-a-3", text: "should not land" }))).code, "UNAUTHENTICATED");
      assert.equal((await refusal(client.stats({ agentId: "tenant-a-3" }))).code, "UNAUTHENTICATED");
      const session = client.stream();
      assert.equal((await refusal(session.recall({ agentId: "tenant-a-3", query: "x" }))).code, "UNAUTHENTICATED");
      await session.close().catch(() => undefined);
    }
    assert.equal((await tenant.stats({ agentId: "tenant-a-3" })).total, 0n);
  });
});
