/**
 * Retries, deadlines and addresses, against stand-in HTTP/2 servers whose behaviour
 * the test controls (always UNAVAILABLE, never answering, nothing listening).
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { baseUrlOf } from "../src/client.js";
import { MemorydClient, MemorydError } from "../src/index.js";

/** An h2c server answering every gRPC call with a trailers-only UNAVAILABLE; counts calls. */
async function unavailableServer(): Promise<{ address: string; calls: Map<string, number>; close(): Promise<void> }> {
  const calls = new Map<string, number>();
  const server = http2.createServer();
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    const method = String(headers[":path"]).split("/").pop()!;
    calls.set(method, (calls.get(method) ?? 0) + 1);
    stream.respond(
      { ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "warming up" },
      { endStream: true },
    );
  });
  return listen(server, calls);
}

/** An h2c server that accepts calls and never answers them. */
async function silentServer(): Promise<{ address: string; calls: Map<string, number>; close(): Promise<void> }> {
  const calls = new Map<string, number>();
  const server = http2.createServer();
  server.on("stream", (stream) => stream.on("error", () => {}));
  return listen(server, calls);
}

function listen(server: http2.Http2Server, calls: Map<string, number>) {
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    // client.close() ends the connection with GOAWAY(CANCEL), an "error" on this side.
    s.on("error", () => {});
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  return new Promise<{ address: string; calls: Map<string, number>; close(): Promise<void> }>((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        address: `http://127.0.0.1:${port}`,
        calls,
        close: () =>
          new Promise<void>((done) => {
            for (const s of sessions) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

const fastRetry = { maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 20 };

describe("retries on UNAVAILABLE", () => {
  let fake: Awaited<ReturnType<typeof unavailableServer>>;
  let client: MemorydClient;

  before(async () => {
    fake = await unavailableServer();
    client = new MemorydClient({ address: fake.address, retry: fastRetry });
  });
  after(async () => {
    client.close();
    await fake.close();
  });

  const cases: Array<[label: string, method: string, call: (c: MemorydClient) => Promise<unknown>, attempts: number]> = [
    ["recall", "Recall", (c) => c.recall({ agentId: "a", query: "q" }), 3],
    ["get", "Get", (c) => c.get({ agentId: "a", id: "x" }), 3],
    ["list", "List", (c) => c.list({ agentId: "a" }), 3],
    ["stats", "Stats", (c) => c.stats({ agentId: "a" }), 3],
    ["store with an idempotency key", "Store", (c) => c.store({ agentId: "a", text: "t", idempotencyKey: "k" }), 3],
    ["store without one", "Store", (c) => c.store({ agentId: "a", text: "t" }), 1],
    ["forget", "Forget", (c) => c.forget({ agentId: "a", id: "x" }), 1],
    ["update", "Update", (c) => c.update({ agentId: "a", id: "x" }), 1],
    ["listConflicts", "ListConflicts", (c) => c.listConflicts({ agentId: "a" }), 3],
    ["buildContext", "BuildContext", (c) => c.buildContext({ agentId: "a", prompt: "p" }), 1],
    ["capture", "Capture", (c) => c.capture({ agentId: "a", messages: [{ role: "user", text: "t" }] }), 1],
    ["export", "Export", (c) => c.export({ agentId: "a" }).next(), 1],
    ["importMemories", "Import", (c) => c.importMemories({ agentId: "a", memories: [] }), 1],
  ];
  for (const [label, method, call, attempts] of cases) {
    it(`${label}: ${attempts} attempt(s)`, async () => {
      fake.calls.clear();
      const error = await call(client).catch((reason: unknown) => reason);
      assert.ok(error instanceof MemorydError);
      assert.equal(error.code, "UNAVAILABLE");
      assert.equal(error.message, "warming up");
      assert.equal(fake.calls.get(method), attempts);
    });
  }

  it("retry: false makes one attempt", async () => {
    fake.calls.clear();
    const once = new MemorydClient({ address: fake.address, retry: false });
    await assert.rejects(once.recall({ agentId: "a", query: "q" }), { code: "UNAVAILABLE" });
    once.close();
    assert.equal(fake.calls.get("Recall"), 1);
  });

  it("stops retrying at the deadline", async () => {
    fake.calls.clear();
    const patient = new MemorydClient({
      address: fake.address,
      retry: { maxAttempts: 1_000, initialBackoffMs: 50, maxBackoffMs: 50 },
    });
    const started = Date.now();
    const error = await patient.recall({ agentId: "a", query: "q" }, { timeoutMs: 300 }).catch((e: unknown) => e);
    patient.close();
    assert.ok(error instanceof MemorydError);
    // UNAVAILABLE when the deadline leaves no room for another back-off (the usual case);
    // DEADLINE_EXCEEDED when it strikes during an attempt (a busy machine).
    assert.ok(["UNAVAILABLE", "DEADLINE_EXCEEDED"].includes(error.code), String(error));
    assert.ok(Date.now() - started < 2_000);
    assert.ok((fake.calls.get("Recall") ?? 0) < 1_000);
  });

  it("an abort during the back-off cancels the call", async () => {
    const patient = new MemorydClient({
      address: fake.address,
      retry: { maxAttempts: 10, initialBackoffMs: 10_000, maxBackoffMs: 10_000 },
    });
    const started = Date.now();
    await assert.rejects(patient.recall({ agentId: "a", query: "q" }, { signal: AbortSignal.timeout(100) }), {
      code: "CANCELLED",
    });
    patient.close();
    assert.ok(Date.now() - started < 5_000);
  });
});

/** An h2c server that closes the whole connection on every call, before answering. */
async function hangUpServer(): Promise<{ address: string; calls: Map<string, number>; close(): Promise<void> }> {
  const calls = new Map<string, number>();
  const server = http2.createServer();
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    const method = String(headers[":path"]).split("/").pop()!;
    calls.set(method, (calls.get(method) ?? 0) + 1);
    stream.session?.destroy();
  });
  return listen(server, calls);
}

describe("deadlines and connection failures", () => {
  it("a daemon that closes the connection before answering: UNAVAILABLE (retried), not CANCELLED", async () => {
    const fake = await hangUpServer();
    const client = new MemorydClient({ address: fake.address, retry: fastRetry });
    const error = await client.stats({ agentId: "a" }).catch((reason: unknown) => reason);
    assert.ok(error instanceof MemorydError, String(error));
    assert.equal(error.code, "UNAVAILABLE", error.message);
    assert.match(error.message, /closed the connection before answering/);
    assert.equal(fake.calls.get("Stats"), 3);
    // The caller's own abort is still CANCELLED.
    await assert.rejects(client.stats({ agentId: "a" }, { signal: AbortSignal.abort() }), { code: "CANCELLED" });
    client.close();
    await fake.close();
  });

  it("a daemon that never answers: DEADLINE_EXCEEDED at the deadline", async () => {
    const fake = await silentServer();
    const client = new MemorydClient({ address: fake.address, timeoutMs: 200 });
    const started = Date.now();
    await assert.rejects(client.stats({ agentId: "a" }), { name: "MemorydError", code: "DEADLINE_EXCEEDED" });
    assert.ok(Date.now() - started < 5_000);
    client.close();
    await fake.close();
  });

  it("hooks and exports that get no answer: DEADLINE_EXCEEDED at their deadline", async () => {
    const fake = await silentServer();
    const client = new MemorydClient({ address: fake.address, timeoutMs: 200 });
    const started = Date.now();
    await assert.rejects(client.buildContext({ agentId: "a", prompt: "p" }), { code: "DEADLINE_EXCEEDED" });
    await assert.rejects(
      client.capture({ agentId: "a", messages: [] }, { timeoutMs: 100 }),
      { code: "DEADLINE_EXCEEDED" },
    );
    // A streaming call has no default deadline; given one, it is kept.
    await assert.rejects(client.export({ agentId: "a" }, { timeoutMs: 100 }).next(), {
      name: "MemorydError",
      code: "DEADLINE_EXCEEDED",
    });
    await assert.rejects(
      client.importMemories({ agentId: "a", memories: [] }, { signal: AbortSignal.timeout(100) }),
      { name: "MemorydError", code: "CANCELLED" },
    );
    assert.ok(Date.now() - started < 5_000);
    client.close();
    await fake.close();
  });

  it("nothing listening: UNAVAILABLE after the retries", async () => {
    const fake = await unavailableServer();
    const address = fake.address;
    await fake.close();
    const client = new MemorydClient({ address, retry: fastRetry });
    await assert.rejects(client.stats({ agentId: "a" }), { code: "UNAVAILABLE" });
    client.close();
  });
});

describe("addresses", () => {
  it("defaults to plain http on 127.0.0.1:50051, https with tls", () => {
    assert.equal(new MemorydClient().baseUrl, "http://127.0.0.1:50051");
    assert.equal(new MemorydClient({ tls: true }).baseUrl, "https://127.0.0.1:50051");
    assert.equal(new MemorydClient({ tls: { ca: "-----BEGIN CERTIFICATE-----" } }).baseUrl, "https://127.0.0.1:50051");
  });
  it("takes host:port, choosing the scheme from tls", () => {
    assert.equal(baseUrlOf("memoryd.internal:50051"), "http://memoryd.internal:50051");
    assert.equal(baseUrlOf("memoryd.internal:50051", true), "https://memoryd.internal:50051");
    assert.equal(baseUrlOf("https://memoryd.internal:443"), "https://memoryd.internal:443");
  });
  it("rejects a scheme that contradicts tls", () => {
    assert.throws(() => baseUrlOf("http://memoryd.internal:50051", true), TypeError);
  });
  it("forget needs exactly one of id and query", async () => {
    const client = new MemorydClient({ address: "http://127.0.0.1:1" });
    await assert.rejects(client.forget({ agentId: "a", id: "", query: "" } as never), { code: "INVALID_ARGUMENT" });
    client.close();
  });
});
