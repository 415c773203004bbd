/**
 * TLS and mTLS through the client, against a daemon with server.tls_cert/tls_key and
 * server.tls_client_ca (client certificates required), whose keys file maps certificate
 * identities to principals. The certificates come from a throwaway CA (pki.ts).
 */

import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import type { MemorydClientOptions } from "../src/index.js";
import { MemorydClient, MemorydError, StoreOutcome } from "../src/index.js";
import { startDaemon, type Daemon } from "./daemon.js";
import { makePki, type Pair, type Pki } from "./pki.js";

const KEYS_FILE = `
[[key]]
name = "gateway-a-cert"
tls_identity = "gateway-a.test"
agents = ["tenant-a-*"]

[[key]]
name = "ops-cert"
tls_identity = "ops.test"
agents = ["*"]
operator = true
`;

/** The MemorydError `promise` rejects with (fails the test if it resolves). */
async function refusal(promise: Promise<unknown>): Promise<MemorydError> {
  const error = await promise.then(
    (value) => assert.fail(`the call succeeded: ${String(value)}`),
    (reason: unknown) => reason,
  );
  assert.ok(error instanceof MemorydError, String(error));
  return error;
}

describe("mTLS", () => {
  let pki: Pki;
  let daemon: Daemon;
  let gateway: Pair;
  let ops: Pair;
  let unlisted: Pair;
  let stranger: Pair;
  const clients: MemorydClient[] = [];
  const connect = (options: MemorydClientOptions): MemorydClient => {
    const client = new MemorydClient({ address: daemon.address, timeoutMs: 20_000, retry: false, ...options });
    clients.push(client);
    return client;
  };

  before(async () => {
    pki = await makePki();
    [gateway, ops, unlisted, stranger] = await Promise.all([
      pki.client("gateway-a.test"),
      pki.client("ops.test"),
      pki.client("nobody.test"),
      pki.stranger("gateway-a.test"), // the listed name, from a CA the daemon does not trust
    ]);
    const keysFile = join(pki.dir, "keys.toml");
    await writeFile(keysFile, KEYS_FILE);
    daemon = await startDaemon({
      tls: true,
      env: {
        MEMORYD_AUTH__KEYS_FILE: keysFile,
        MEMORYD_SERVER__TLS_CERT: pki.server.certFile,
        MEMORYD_SERVER__TLS_KEY: pki.server.keyFile,
        MEMORYD_SERVER__TLS_CLIENT_CA: pki.caFile,
      },
    });
  });

  after(async () => {
    for (const client of clients) client.close();
    if (daemon) assert.equal(await daemon.stop(), 0, `memoryd did not exit cleanly on SIGTERM:\n${daemon.log()}`);
    await pki?.dispose();
  });

  it("a listed certificate (files) acts for its agents, and only for them", async () => {
    assert.match(daemon.address, /^https:\/\/127\.0\.0\.1:\d+$/);
    const client = connect({ tls: { caFile: pki.caFile, certFile: gateway.certFile, keyFile: gateway.keyFile } });
    const stored = await client.store({ agentId: "tenant-a-1", text: "Tenant A's certificate works" });
    assert.equal(stored.outcome, StoreOutcome.CREATED);
    const recalled = await client.recall({ agentId: "tenant-a-1", query: "certificate" });
    assert.equal(recalled.results[0]!.memory!.id, stored.memory!.id);

    const session = client.stream();
    assert.equal((await session.store({ agentId: "tenant-a-2", text: "Streams work over mTLS" })).outcome, StoreOutcome.CREATED);
    assert.equal((await refusal(session.recall({ agentId: "tenant-b-1", query: "anything" }))).code, "PERMISSION_DENIED");
    await session.close();

    assert.equal((await refusal(client.recall({ agentId: "tenant-b-1", query: "certificate" }))).code, "PERMISSION_DENIED");
    assert.equal((await refusal(client.store({ agentId: "tenant-b-1", text: "A writing into B" }))).code, "PERMISSION_DENIED");
    assert.equal((await refusal(client.stats({ agentId: "tenant-a-1", daemonWide: true }))).code, "PERMISSION_DENIED");
  });

  it("the same certificate as PEM text, and through nodeOptions; the operator's certificate is daemon-wide", async () => {
    const pem = connect({ tls: { ca: pki.ca, cert: gateway.cert, key: gateway.key } });
    assert.equal((await pem.stats({ agentId: "tenant-a-1" })).total, 1n);
    const raw = connect({ tls: true, nodeOptions: { ca: pki.ca, cert: gateway.cert, key: gateway.key } });
    assert.equal((await raw.stats({ agentId: "tenant-a-1" })).total, 1n);

    const operator = connect({ tls: { caFile: pki.caFile, certFile: ops.certFile, keyFile: ops.keyFile } });
    const wide = await operator.stats({ agentId: "tenant-b-1", daemonWide: true });
    assert.equal(wide.storeRows, 2n); // tenant-a-1's and tenant-a-2's memories
    assert.equal((await operator.stats({ agentId: "tenant-b-1" })).storeRows, 0n);
  });

  it("a certificate of the daemon's CA that the keys file does not list: UNAUTHENTICATED", async () => {
    const client = connect({ tls: { caFile: pki.caFile, certFile: unlisted.certFile, keyFile: unlisted.keyFile } });
    const error = await refusal(client.store({ agentId: "tenant-a-1", text: "should not land" }));
    assert.equal(error.code, "UNAUTHENTICATED");
    assert.match(error.message, /client certificate listed in the keys file/);
  });

  it("no client certificate, or one from another CA: the connection is refused", async () => {
    for (const tls of [
      { caFile: pki.caFile },
      { caFile: pki.caFile, certFile: stranger.certFile, keyFile: stranger.keyFile },
    ]) {
      const error = await refusal(connect({ tls }).stats({ agentId: "tenant-a-1" }));
      assert.equal(error.code, "UNAVAILABLE", `${JSON.stringify(tls)}: ${error.message}`);
      assert.match(error.message, /closed the connection before answering .*client certificate/);
    }
  });

  it("a client that does not trust the daemon's CA refuses the daemon", async () => {
    const client = connect({ tls: { certFile: gateway.certFile, keyFile: gateway.keyFile } });
    const error = await refusal(client.stats({ agentId: "tenant-a-1" }));
    assert.equal(error.code, "UNAVAILABLE");
    assert.match(error.message, /^TLS with memoryd failed: unable to verify the first certificate/);
  });

  it("refuses TLS options it cannot use, naming them", () => {
    assert.throws(() => new MemorydClient({ tls: { certFile: gateway.certFile } }), /certificate and its key together/);
    assert.throws(() => new MemorydClient({ tls: { ca: pki.ca, caFile: pki.caFile } }), /ca or caFile, not both/);
    assert.throws(() => new MemorydClient({ tls: { caFile: join(pki.dir, "missing.pem") } }), /tls\.caFile: cannot read .*missing\.pem/);
    assert.throws(() => new MemorydClient({ address: "http://127.0.0.1:1", tls: { caFile: pki.caFile } }), /contradicts tls/);
    assert.equal(new MemorydClient({ address: "127.0.0.1:1", tls: { caFile: pki.caFile } }).baseUrl, "https://127.0.0.1:1");
  });
});
