/**
 * MemorydClient over several daemon addresses: the shared routing vectors, each agent on
 * its daemon, failover (with the first try's idempotency key), what never fails over, and
 * the down mark. Daemons on different data dirs share nothing, so what is tested is what
 * the client controls. A "fake" daemon is an in-process gRPC server that records every
 * request and answers each with one chosen status.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, unlinkSync, writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import { createServer } from "node:net";
import { dirname, resolve as resolvePath } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import { Code, ConnectError } from "@connectrpc/connect";
import ts from "typescript";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { HookService, MemorydClient, MemorydError, MemoryService, StoreOutcome } from "../src/index.js";
import { normalAddress, rendezvousOrder, weight } from "../src/routing.js";
import { startDaemon, type Daemon } from "./daemon.js";

const here = dirname(fileURLToPath(import.meta.url));
const packageRoot = resolvePath(here, "../..");
const vectors = JSON.parse(readFileSync(resolvePath(here, "../../../../tests/data/routing_vectors.json"), "utf8")) as {
  weights: { address: string; agent_id: string; weight: string }[];
  orders: { addresses: string[]; agent_id: string; order: string[] }[];
};

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<MemorydError> {
  const error = await promise.then(
    () => assert.fail(`expected ${code}, the call succeeded`),
    (reason: unknown) => reason,
  );
  assert.ok(error instanceof MemorydError, `expected a MemorydError, got ${String(error)}`);
  assert.equal(error.code, code, `${error.code}: ${error.message}`);
  return error;
}

/** A daemon that answers every call with `code` and records what it was sent. */
interface Fake {
  address: string;
  code: Code;
  calls: { name: string; request: { idempotencyKey?: string } }[];
  close(): Promise<void>;
}

async function startFake(code: Code): Promise<Fake> {
  const fake: Fake = { address: "", code, calls: [], close: async () => undefined };
  const answer = (name: string) => (request: object) => {
    fake.calls.push({ name, request: request as { idempotencyKey?: string } });
    throw new ConnectError(`the fake daemon answers ${Code[fake.code]}`, fake.code);
  };
  const handler = connectNodeAdapter({
    routes: (router) => {
      router.service(MemoryService, {
        store: answer("Store"),
        recall: answer("Recall"),
        update: answer("Update"),
        forget: answer("Forget"),
        get: answer("Get"),
      });
      router.service(HookService, { capture: answer("Capture"), buildContext: answer("BuildContext") });
    },
  });
  const server = http2.createServer(handler);
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as { port: number }).port;
  fake.address = `http://127.0.0.1:${port}`;
  fake.close = () =>
    new Promise<void>((done) => {
      server.close(() => done());
      // Open client sessions would keep the server from closing.
      for (const session of sessions) session.destroy();
    });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  return fake;
}

/**
 * `count` distinct addresses where nothing listens (connections are refused).
 * Every listener stays open until all have their ports: a port closed before
 * the next bind may be handed out again, naming the same address twice.
 */
async function closedPorts(count: number): Promise<string[]> {
  const servers = Array.from({ length: count }, () => createServer());
  await Promise.all(servers.map((s) => new Promise<void>((done) => s.listen(0, "127.0.0.1", done))));
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise<void>((done) => s.close(() => done()))));
  return ports.map((port) => `http://127.0.0.1:${port}`);
}

/** An address where nothing listens (connections are refused). */
async function closedPort(): Promise<string> {
  return (await closedPorts(1))[0]!;
}

/** A fresh agent id whose first daemon is `first`. */
function agentPreferring(addresses: string[], first: string): string {
  for (;;) {
    const agent = `fleet-${randomUUID().slice(0, 10)}`;
    if (addresses[rendezvousOrder(addresses, agent)[0]!] === first) return agent;
  }
}

async function texts(address: string, agentId: string): Promise<string[]> {
  const client = new MemorydClient({ address });
  try {
    const out: string[] = [];
    for await (const memory of client.listAll({ agentId })) out.push(memory.text);
    return out.sort();
  } finally {
    client.close();
  }
}

describe("routing vectors shared by every client", () => {
  it("computes every weight of tests/data/routing_vectors.json", () => {
    assert.ok(vectors.weights.length >= 5);
    for (const v of vectors.weights) {
      assert.equal(weight(v.address, v.agent_id).toString("hex"), v.weight, `${v.address} / ${v.agent_id}`);
    }
  });

  it("orders every fleet of tests/data/routing_vectors.json", () => {
    assert.ok(vectors.orders.length >= 20);
    for (const v of vectors.orders) {
      const got = rendezvousOrder(v.addresses, v.agent_id).map((i) => v.addresses[i]);
      assert.deepEqual(got, v.order, `${v.agent_id} over ${v.addresses.join(",")}`);
    }
  });

  it("takes an address with or without a scheme as one daemon, and refuses it twice", () => {
    assert.equal(normalAddress("HTTP://10.0.0.5:50051/"), "10.0.0.5:50051");
    assert.throws(
      () => new MemorydClient({ address: ["10.0.0.5:50051", "http://10.0.0.5:50051/"] }),
      /name the same daemon/,
    );
  });
});

describe("MemorydClient over a fleet", () => {
  let a: Daemon;
  let b: Daemon;
  const fakes: Fake[] = [];

  before(async () => {
    [a, b] = await Promise.all([startDaemon(), startDaemon()]);
  });

  after(async () => {
    await Promise.all(fakes.map((f) => f.close()));
    for (const daemon of [a, b]) {
      if (daemon) await daemon.stop();
    }
  });

  async function fake(code: Code): Promise<Fake> {
    const f = await startFake(code);
    fakes.push(f);
    return f;
  }

  it("sends each agent to its first daemon only", async () => {
    const fleet = [a.address, b.address];
    const agents = [0, 1, 2, 3].map((i) => agentPreferring(fleet, fleet[i % 2]!));
    const client = new MemorydClient({ address: fleet });
    try {
      for (const agentId of agents) {
        await client.store({ agentId, text: `${agentId} likes green tea` });
        const recalled = await client.recall({ agentId, query: "tea" });
        assert.deepEqual(recalled.results.map((r) => r.memory!.text), [`${agentId} likes green tea`]);
      }
    } finally {
      client.close();
    }
    for (const [i, agentId] of agents.entries()) {
      assert.deepEqual(await texts(fleet[i % 2]!, agentId), [`${agentId} likes green tea`]);
      assert.deepEqual(await texts(fleet[1 - (i % 2)]!, agentId), []);
    }
  });

  it("fails a store over with the key of its first try, which the next daemon replays", async () => {
    const down = await fake(Code.Unavailable);
    const fleet = [down.address, b.address];
    const agentId = agentPreferring(fleet, down.address);
    const client = new MemorydClient({ address: fleet });
    let stored;
    try {
      stored = (await client.store({ agentId, text: "The standup is at 9:30" })).memory!;
    } finally {
      client.close();
    }
    assert.deepEqual(down.calls.map((c) => c.name), ["Store"]);
    const key = down.calls[0]!.request.idempotencyKey!;
    assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const direct = new MemorydClient({ address: b.address });
    try {
      const replay = await direct.store({ agentId, text: "The standup is at 9:30", idempotencyKey: key });
      assert.equal(replay.outcome, StoreOutcome.CREATED);
      assert.equal(replay.memory!.id, stored.id);
      await rejectsWith(direct.store({ agentId, text: "At 10:00", idempotencyKey: key }), "INVALID_ARGUMENT");
    } finally {
      direct.close();
    }
  });

  it("fails a capture over with its key, and sends the caller's key as it is", async () => {
    const down = await fake(Code.Unavailable);
    const fleet = [down.address, b.address];
    const agentId = agentPreferring(fleet, down.address);
    const client = new MemorydClient({ address: fleet, downForMs: 0 });
    const messages = [{ role: "user", text: "Remember that my dentist is Dr. Okafor" }];
    try {
      const first = await client.capture({ agentId, sessionId: "s1", messages });
      assert.deepEqual(first.decisions.map((d) => d.reason), ["captured"]);
      await client.store({ agentId, text: "Mine", idempotencyKey: "msg-1842" });
      const key = down.calls[0]!.request.idempotencyKey!;
      assert.match(key, /^[0-9a-f-]{36}$/);
      assert.equal(down.calls[1]!.request.idempotencyKey, "msg-1842");
      const direct = new MemorydClient({ address: b.address });
      try {
        const again = await direct.capture({ agentId, sessionId: "s2", messages, idempotencyKey: key });
        assert.deepEqual(again.decisions.map((d) => d.reason), ["captured"]);
        assert.equal(again.decisions[0]!.memoryId, first.decisions[0]!.memoryId);
      } finally {
        direct.close();
      }
    } finally {
      client.close();
    }
    assert.deepEqual(down.calls.map((c) => c.name), ["Capture", "Store"]);
  });

  it("never sends an update or a forget again once it may have reached a daemon", async () => {
    const down = await fake(Code.Unavailable);
    const fleet = [down.address, b.address];
    const agentId = agentPreferring(fleet, down.address);
    const direct = new MemorydClient({ address: b.address });
    const memory = (await direct.store({ agentId, text: "The build takes 12 minutes" })).memory!;
    direct.close();
    const client = new MemorydClient({ address: fleet, downForMs: 0 });
    try {
      await rejectsWith(client.update({ agentId, id: memory.id, text: "The build takes 3 minutes" }), "UNAVAILABLE");
      await rejectsWith(client.forget({ agentId, id: memory.id }), "UNAVAILABLE");
    } finally {
      client.close();
    }
    assert.deepEqual(down.calls.map((c) => c.name), ["Update", "Forget"]);
    assert.deepEqual(await texts(b.address, agentId), ["The build takes 12 minutes"]);
  });

  for (const [code, name] of [
    [Code.NotFound, "NOT_FOUND"],
    [Code.InvalidArgument, "INVALID_ARGUMENT"],
    [Code.PermissionDenied, "PERMISSION_DENIED"],
  ] as const) {
    it(`never fails over on ${name}`, async () => {
      const refusing = await fake(code);
      const fleet = [refusing.address, b.address];
      const agentId = agentPreferring(fleet, refusing.address);
      const direct = new MemorydClient({ address: b.address });
      const memory = (await direct.store({ agentId, text: "Lunch is at noon" })).memory!;
      direct.close();
      const client = new MemorydClient({ address: fleet });
      try {
        await rejectsWith(client.get({ agentId, id: memory.id }), name);
        await rejectsWith(client.store({ agentId, text: "Dinner is at seven" }), name);
      } finally {
        client.close();
      }
      assert.deepEqual(refusing.calls.map((c) => c.name), ["Get", "Store"]);
      assert.deepEqual(await texts(b.address, agentId), ["Lunch is at noon"]);
    });
  }

  it("fails every call over from a refused connection, streams included", async () => {
    const refused = await closedPort();
    const fleet = [refused, b.address];
    const agentId = agentPreferring(fleet, refused);
    const client = new MemorydClient({ address: fleet });
    try {
      const memory = (await client.store({ agentId, text: "The wifi password is on the fridge" })).memory!;
      await client.update({ agentId, id: memory.id, text: "The wifi password is in the drawer" });
      assert.equal((await client.get({ agentId, id: memory.id })).text, "The wifi password is in the drawer");
      const exported = [];
      for await (const m of client.export({ agentId })) exported.push(m);
      assert.deepEqual(exported.map((m) => m.id), [memory.id]);
      // The refused daemon is marked down by now: the session goes to the next one.
      const session = client.stream({ agentId });
      const answer = await session.recall({ agentId, query: "wifi password" });
      await session.close();
      assert.equal(answer.results[0]?.memory?.id, memory.id);
      assert.deepEqual((await client.forget({ agentId, id: memory.id })).deletedIds, [memory.id]);
    } finally {
      client.close();
    }
    assert.deepEqual(await texts(b.address, agentId), []);
  });

  it("skips a down daemon for downForMs, then tries it again first", async () => {
    const down = await fake(Code.Unavailable);
    const fleet = [down.address, b.address];
    const agentId = agentPreferring(fleet, down.address);
    const skipping = new MemorydClient({ address: fleet, downForMs: 600_000 });
    try {
      for (let i = 0; i < 5; i++) await skipping.recall({ agentId, query: "anything" });
    } finally {
      skipping.close();
    }
    assert.deepEqual(down.calls.map((c) => c.name), ["Recall"]);
    const probing = new MemorydClient({ address: fleet, downForMs: 200 });
    try {
      await probing.recall({ agentId, query: "anything" });
      await sleep(500);
      down.code = Code.NotFound; // back, and answering: the agent is served there again
      await rejectsWith(probing.recall({ agentId, query: "anything" }), "NOT_FOUND");
    } finally {
      probing.close();
    }
    assert.deepEqual(down.calls.map((c) => c.name), ["Recall", "Recall", "Recall"]);
  });

  it("sends a stopped daemon's agents to the next one", async () => {
    const c = await startDaemon();
    const fleet = [c.address, b.address];
    const agentId = agentPreferring(fleet, c.address);
    const client = new MemorydClient({ address: fleet });
    try {
      await client.store({ agentId, text: "Before: the office is in Lyon" });
      assert.equal(await c.stop(), 0);
      const during = (await client.store({ agentId, text: "During: the office moved to Nantes" })).memory!;
      await client.update({ agentId, id: during.id, importance: 0.2 });
      assert.ok(Math.abs((await client.get({ agentId, id: during.id })).importance - 0.2) < 1e-6);
    } finally {
      client.close();
    }
    assert.deepEqual(await texts(b.address, agentId), ["During: the office moved to Nantes"]);
  });

  it("runs the README's fleet example as printed", async () => {
    const readme = readFileSync(resolvePath(packageRoot, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("### Several daemons"));
    const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
    assert.ok(code.includes('"127.0.0.1:50051", "127.0.0.1:50052"'), code);
    const host = (url: string): string => url.replace("http://", "");
    const script = resolvePath(packageRoot, "dist", "readme-fleet-example.mjs");
    const source = code.replace("127.0.0.1:50051", host(a.address)).replace("127.0.0.1:50052", host(b.address));
    const js = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    writeFileSync(script, js);
    try {
      const out = execFileSync(process.execPath, [script], { cwd: packageRoot, encoding: "utf8" });
      const id = out.trim();
      const home = [a.address, b.address][rendezvousOrder([host(a.address), host(b.address)], "main")[0]!]!;
      const direct = new MemorydClient({ address: home });
      try {
        assert.equal((await direct.get({ agentId: "main", id })).text, "The staging database is db-stage-2");
      } finally {
        direct.close();
      }
    } finally {
      unlinkSync(script);
    }
  });

  it("names the daemon when every one is down", async () => {
    const fleet = await closedPorts(2);
    const client = new MemorydClient({ address: fleet, retry: false });
    try {
      const error = await rejectsWith(client.recall({ agentId: "main", query: "x" }), "UNAVAILABLE");
      assert.match(error.message, /no connection to the daemon at http:\/\/127\.0\.0\.1:\d+/);
    } finally {
      client.close();
    }
  });
});
