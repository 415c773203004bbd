/**
 * Trace context: each call carries the active OpenTelemetry context as a W3C
 * `traceparent` (through the registered propagator), retries included; with no active
 * span nothing is sent. A stand-in HTTP/2 server records the headers it receives.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

import { MemorydClient } from "../src/index.js";

interface Recorder {
  address: string;
  headers: http2.IncomingHttpHeaders[];
  close(): Promise<void>;
}

/** An h2c server answering every call UNAVAILABLE; keeps each call's headers. */
async function recorder(): Promise<Recorder> {
  const headers: http2.IncomingHttpHeaders[] = [];
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    s.on("error", () => {});
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  server.on("stream", (stream, h) => {
    stream.on("error", () => {});
    headers.push(h);
    stream.respond(
      { ":status": 200, "content-type": "application/grpc", "grpc-status": "14", "grpc-message": "down" },
      { endStream: true },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    address: `http://127.0.0.1:${port}`,
    headers,
    close: () =>
      new Promise<void>((done) => {
        for (const s of sessions) s.destroy();
        server.close(() => done());
      }),
  };
}

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";

describe("trace context", () => {
  let fake: Recorder;
  let contextManager: AsyncLocalStorageContextManager;

  before(async () => {
    fake = await recorder();
    // What an application's OpenTelemetry SDK registers (NodeSDK does the same by default).
    contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  });
  after(async () => {
    propagation.disable();
    context.disable();
    await fake.close();
  });

  const parent = trace.setSpanContext(context.active(), {
    traceId: TRACE_ID,
    spanId: SPAN_ID,
    traceFlags: TraceFlags.SAMPLED,
    isRemote: false,
  });

  it("each call sends the active span as its traceparent, on every retry", async () => {
    fake.headers.length = 0;
    const client = new MemorydClient({
      address: fake.address,
      retry: { maxAttempts: 3, initialBackoffMs: 5, maxBackoffMs: 10 },
    });
    await assert.rejects(
      context.with(parent, () => client.recall({ agentId: "a", query: "q" })),
      { code: "UNAVAILABLE" },
    );
    client.close();
    assert.equal(fake.headers.length, 3);
    for (const h of fake.headers) {
      assert.equal(h["traceparent"], `00-${TRACE_ID}-${SPAN_ID}-01`);
    }
  });

  it("the traceparent is the span active at the call, not another one", async () => {
    fake.headers.length = 0;
    const client = new MemorydClient({ address: fake.address, retry: false });
    const other = trace.setSpanContext(context.active(), {
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: TraceFlags.NONE,
    });
    await Promise.allSettled([
      context.with(parent, () => client.store({ agentId: "a", text: "t" })),
      context.with(other, () => client.get({ agentId: "a", id: "x" })),
    ]);
    client.close();
    const byMethod = new Map(fake.headers.map((h) => [String(h[":path"]).split("/").pop(), h["traceparent"]]));
    assert.equal(byMethod.get("Store"), `00-${TRACE_ID}-${SPAN_ID}-01`);
    assert.equal(byMethod.get("Get"), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  });

  it("without an active span no trace header is sent", async () => {
    fake.headers.length = 0;
    const client = new MemorydClient({ address: fake.address, retry: false });
    await assert.rejects(client.recall({ agentId: "a", query: "q" }), { code: "UNAVAILABLE" });
    client.close();
    assert.equal(fake.headers.length, 1);
    assert.equal(fake.headers[0]?.["traceparent"], undefined);
  });
});
