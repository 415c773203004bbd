/** While memoryd loads it answers UNAVAILABLE; idempotent calls ride that out with retries. */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { MemorydClient } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";

describe("a daemon that is still starting", () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await startDaemon({ until: "listening" });
  });
  after(async () => {
    if (!daemon) return; // start-up failed; before() reported why
    assert.equal(await daemon.stop(), 0, `memoryd did not exit cleanly on SIGTERM:\n${daemon.log()}`);
  });

  it("answers UNAVAILABLE, which retries outlast", async () => {
    const impatient = new MemorydClient({ address: daemon.address, retry: false });
    await assert.rejects(impatient.store({ agentId: "boot", text: "written during start-up" }), {
      code: "UNAVAILABLE",
      message: /starting/,
    });
    impatient.close();

    const patient = new MemorydClient({
      address: daemon.address,
      timeoutMs: 120_000,
      retry: { maxAttempts: 1_000, initialBackoffMs: 100, maxBackoffMs: 500 },
    });
    const stats = await patient.stats({ agentId: "boot" });
    assert.equal(stats.total, 0n, "the store during start-up wrote nothing");
    patient.close();
  });
});
