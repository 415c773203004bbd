/**
 * The exception tree against real daemons: every failure, from a unary call, a Stream op,
 * the Stream itself, an export or an import, is a MemorydError of the class named after
 * its status, keeping the code, the daemon's message and the retry-after-ms wait.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import { after, before, describe, it } from "node:test";

import {
  DeadlineExceeded,
  FailedPrecondition,
  InvalidArgument,
  MemorydClient,
  MemorydError,
  NotFound,
  Overloaded,
  PermissionDenied,
  ResourceExhausted,
  Unauthenticated,
  Unavailable,
} from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

/** The error `promise` rejects with; fails if it resolves. */
async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => assert.fail("the call succeeded"),
    (reason: unknown) => reason,
  );
}

/** A loopback port nothing listens on. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

describe("the exception tree", () => {
  const token = `s3cret-${randomUUID()}`;
  let open: Daemon;
  let guarded: Daemon;
  let client: MemorydClient;

  before(async () => {
    [open, guarded] = await Promise.all([
      startDaemon(),
      startDaemon({
        token,
        env: { MEMORYD_LIMITS__REQUESTS_PER_SECOND: "1", MEMORYD_LIMITS__REQUEST_BURST: "1" },
      }),
    ]);
    client = new MemorydClient({ address: open.address, retry: false, timeoutMs: 30_000 });
  });

  after(async () => {
    client?.close();
    for (const daemon of [open, guarded]) {
      if (daemon) assert.equal(await daemon.stop(), 0, daemon.log());
    }
  });

  it("unary calls reject with the class of their status", async () => {
    const agentId = `e-${randomUUID().slice(0, 8)}`;
    const missing = randomUUID();
    const notFound = await failure(client.get({ agentId, id: missing }));
    assert.ok(notFound instanceof NotFound && notFound instanceof MemorydError);
    assert.equal(notFound.code, "NOT_FOUND");
    assert.equal(notFound.status, 5);
    assert.match(notFound.message, new RegExp(missing));
    assert.equal(notFound.retryAfterMs, undefined);

    const invalid = await failure(client.store({ agentId, text: "" }));
    assert.ok(invalid instanceof InvalidArgument, String(invalid));
    assert.match(invalid.message, /text/);

    const denied = await failure(client.store({ agentId, text: "Elsewhere.", scope: "agent:someone-else" }));
    assert.ok(denied instanceof PermissionDenied, String(denied));
    assert.match(denied.message, /agent:someone-else/);

    const late = await failure(client.recall({ agentId, query: `anything new ${Date.now()}` }, { timeoutMs: 1 }));
    assert.ok(late instanceof DeadlineExceeded, String(late));
  });

  it("no daemon at the address is Unavailable", async () => {
    const port = await freePort();
    const nowhere = new MemorydClient({ address: `http://127.0.0.1:${port}`, retry: false, timeoutMs: 5_000 });
    const error = await failure(nowhere.stats({ agentId: "main" }));
    assert.ok(error instanceof Unavailable, String(error));
    assert.equal(error.code, "UNAVAILABLE");
    nowhere.close();
  });

  it("Stream ops and the session reject with the class of their status", async () => {
    const session = client.stream();
    const op = await failure(session.update({ agentId: "typed", id: "not-a-uuid", text: "x" }));
    assert.ok(op instanceof InvalidArgument, String(op));
    await session.close();
    const closed = await failure(session.store({ agentId: "typed", text: "too late" }));
    assert.ok(closed instanceof FailedPrecondition, String(closed));
  });

  it("export, import and the Stream without the token reject with Unauthenticated", async () => {
    const stranger = new MemorydClient({ address: guarded.address, token: "wrong", retry: false, timeoutMs: 10_000 });
    const exported = await failure(
      (async () => {
        for await (const _ of stranger.export({ agentId: "main" })) void _;
      })(),
    );
    assert.ok(exported instanceof Unauthenticated, String(exported));
    const imported = await failure(
      stranger.importMemories({ agentId: "main", memories: [{ text: "Imported without the token." }] }),
    );
    assert.ok(imported instanceof Unauthenticated, String(imported));
    const session = stranger.stream({ timeoutMs: 10_000 });
    const op = await failure(session.recall({ agentId: "main", query: "anything" }));
    assert.ok(op instanceof Unauthenticated, String(op));
    await session.close().catch(() => undefined);
    stranger.close();
  });

  it("a refusal over the rate is ResourceExhausted (Overloaded) with how long to wait", async () => {
    const member = new MemorydClient({ address: guarded.address, token, retry: false, timeoutMs: 10_000 });
    const agentId = `rl-${randomUUID().slice(0, 8)}`;
    let refused: unknown;
    for (let i = 0; i < 5 && refused === undefined; i++) {
      await member.stats({ agentId }).catch((e: unknown) => (refused = e));
    }
    assert.ok(refused instanceof ResourceExhausted && refused instanceof Overloaded, String(refused));
    assert.equal(refused.code, "RESOURCE_EXHAUSTED");
    assert.ok(refused.retryAfterMs !== undefined && refused.retryAfterMs > 0 && refused.retryAfterMs <= 1000);
    assert.equal(refused.metadata.get("retry-after-ms"), String(refused.retryAfterMs));
    member.close();
  });
});
