/** Bearer-token auth against a daemon started with MEMORYD_AUTH_TOKEN. */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { MemorydClient, MemorydError } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

const TOKEN = "s3cret-token-for-tests";

describe("token auth", () => {
  let daemon: Daemon;
  const clients: MemorydClient[] = [];
  const connect = (token?: string): MemorydClient => {
    const client = new MemorydClient(token === undefined ? { address: daemon.address } : { address: daemon.address, token });
    clients.push(client);
    return client;
  };

  before(async () => {
    daemon = await startDaemon({ token: TOKEN });
  });

  after(async () => {
    for (const client of clients) client.close();
    if (!daemon) return; // start-up failed; before() reported why
    assert.equal(await daemon.stop(), 0, `memoryd did not exit cleanly on SIGTERM:\n${daemon.log()}`);
  });

  it("without a token: UNAUTHENTICATED, with a message saying what to send", async () => {
    const error = await connect()
      .stats({ agentId: "main" })
      .catch((reason: unknown) => reason);
    assert.ok(error instanceof MemorydError);
    assert.equal(error.code, "UNAUTHENTICATED");
    assert.match(error.message, /authorization: Bearer/);
  });

  it("with a wrong token: UNAUTHENTICATED, and nothing is written", async () => {
    await assert.rejects(connect("wrong").store({ agentId: "main", text: "should not land" }), {
      name: "MemorydError",
      code: "UNAUTHENTICATED",
    });
    assert.equal((await connect(TOKEN).stats({ agentId: "main" })).total, 0n);
  });

  it("with the token: calls and Stream sessions work", async () => {
    const client = connect(TOKEN);
    const stored = await client.store({ agentId: "main", text: "The token works" });
    assert.equal((await client.get({ agentId: "main", id: stored.memory!.id })).text, "The token works");
    const session = client.stream();
    const recalled = await session.recall({ agentId: "main", query: "token" });
    assert.equal(recalled.results[0]!.memory!.id, stored.memory!.id);
    await session.close();
  });

  it("a Stream session without the token fails every op with UNAUTHENTICATED", async () => {
    const session = connect().stream();
    await assert.rejects(session.recall({ agentId: "main", query: "token" }), { code: "UNAUTHENTICATED" });
    await assert.rejects(session.close(), { code: "UNAUTHENTICATED" });
  });
});
