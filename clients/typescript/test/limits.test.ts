/**
 * Rate limits through the client: a call over the rate is refused with RESOURCE_EXHAUSTED
 * and `retryAfterMs` (nothing done), and the client, told how long to wait, sends it again
 * within its deadline, idempotent or not, so nothing is lost and nothing stored twice.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, it } from "node:test";

import { MemorydClient, MemorydError } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

describe("rate limits", () => {
  let daemon: Daemon;
  before(async () => {
    daemon = await startDaemon({
      env: { MEMORYD_LIMITS__REQUESTS_PER_SECOND: "2", MEMORYD_LIMITS__REQUEST_BURST: "2" },
    });
  });
  after(async () => {
    assert.equal(await daemon.stop(), 0);
  });

  it("refuses a call over the rate with how long to wait, having done nothing", async () => {
    const agent = `rl-${randomUUID().slice(0, 8)}`;
    const client = new MemorydClient({ address: daemon.address, retry: false, timeoutMs: 30_000 });
    let refused: MemorydError | undefined;
    let stored = 0;
    for (let i = 0; i < 6 && refused === undefined; i++) {
      try {
        await client.store({ agentId: agent, text: `Rate probe ${i}.` });
        stored++;
      } catch (e) {
        refused = e as MemorydError;
      }
    }
    assert.ok(refused, "six stores in a burst of 2 at 2/s all passed");
    assert.equal(refused.code, "RESOURCE_EXHAUSTED");
    assert.ok(refused.retryAfterMs !== undefined && refused.retryAfterMs > 0, String(refused.retryAfterMs));
    assert.ok(refused.retryAfterMs <= 1000);
    await new Promise((r) => setTimeout(r, 1500));
    const listed = await client.list({ agentId: agent, pageSize: 100 });
    assert.equal(listed.memories.length, stored);
    client.close();
  });

  it("waits as told and gets every store through exactly once", async () => {
    const agent = `rl-${randomUUID().slice(0, 8)}`;
    const client = new MemorydClient({ address: daemon.address, timeoutMs: 30_000 });
    const ids = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await client.store({ agentId: agent, text: `Patient store number ${i}.` })).memory?.id);
    }
    assert.equal(new Set(ids).size, 5);
    const stats = await client.stats({ agentId: agent });
    assert.equal(Number(stats.total), 5);
    client.close();
  });
});
