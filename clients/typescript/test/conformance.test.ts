/**
 * The conformance scenarios (../../tests/conformance/scenarios.json) through this client,
 * against a real daemon started with auth on. The interpreter of the scenario language is
 * the TypeScript copy of tests/conformance/README.md's rules.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve as resolvePath } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

import type { DescMessage, JsonValue } from "@bufbuild/protobuf";
import { create, fromJson, toJson } from "@bufbuild/protobuf";

import { MemorydClient, MemorydError } from "../src/index.js";
import type { StreamOp } from "../src/index.js";
import {
  BuildContextRequestSchema,
  BuildContextResponseSchema,
  CaptureRequestSchema,
  CaptureResponseSchema,
  HookService,
} from "../src/gen/memoryd/v1/hooks_pb.js";
import {
  ExportRequestSchema,
  ForgetRequestSchema,
  ForgetResponseSchema,
  GetRequestSchema,
  GetResponseSchema,
  ImportRequestSchema,
  ImportResponseSchema,
  ListConflictsRequestSchema,
  ListConflictsResponseSchema,
  ListRequestSchema,
  ListResponseSchema,
  MemorySchema,
  MemoryService,
  RecallRequestSchema,
  RecallResponseSchema,
  StatsRequestSchema,
  StatsResponseSchema,
  StoreRequestSchema,
  StoreResponseSchema,
  StreamRequestSchema,
  StreamResponseSchema,
  UpdateRequestSchema,
  UpdateResponseSchema,
} from "../src/gen/memoryd/v1/memory_pb.js";
import { startDaemon, type Daemon } from "./daemon.js";

type Json = JsonValue | undefined;
type Obj = { [key: string]: JsonValue };

interface Step {
  rpc: string;
  client?: string;
  request?: JsonValue;
  requests?: JsonValue[];
  code?: string;
  message_contains?: string;
  checks?: Obj[];
  save?: Record<string, string>;
}
interface Scenario {
  name: string;
  steps: Step[];
}

const here = dirname(fileURLToPath(import.meta.url));
const scenarioPath =
  process.env["MEMORYD_CONFORMANCE_SCENARIOS"] || resolvePath(here, "../../../../tests/conformance/scenarios.json");
const doc = JSON.parse(readFileSync(scenarioPath, "utf8")) as { auth_token: string; scenarios: Scenario[] };

describe("conformance: every RPC has a scenario", () => {
  it("covers each method of MemoryService and HookService", () => {
    const covered = new Set(doc.scenarios.flatMap((s) => s.steps.map((st) => st.rpc)));
    const rpcs = [MemoryService, HookService].flatMap((svc) => svc.methods.map((m) => `${svc.name}.${m.name}`));
    assert.ok(rpcs.length > 0);
    assert.deepEqual(rpcs.filter((r) => !covered.has(r)), [], "RPCs without a conformance scenario");
    assert.deepEqual([...covered].filter((r) => !rpcs.includes(r)), [], "scenarios name RPCs the proto lacks");
  });
});

describe("conformance scenarios", () => {
  let daemon: Daemon;
  const clients = new Map<string, MemorydClient>();

  before(async () => {
    daemon = await startDaemon({ token: doc.auth_token });
    const tokens: Record<string, string | undefined> = {
      default: doc.auth_token,
      no_token: undefined,
      wrong_token: "wrong-token",
    };
    for (const [name, token] of Object.entries(tokens)) {
      const options = token === undefined ? { address: daemon.address, timeoutMs: 30_000 } : { address: daemon.address, token, timeoutMs: 30_000 };
      clients.set(name, new MemorydClient(options));
    }
  });

  after(async () => {
    for (const c of clients.values()) c.close();
    if (!daemon) return;
    assert.equal(await daemon.stop(), 0, `memoryd did not exit cleanly on SIGTERM:\n${daemon.log()}`);
  });

  for (const scenario of doc.scenarios) {
    it(scenario.name, async () => runScenario(clients, scenario));
  }
});

async function runScenario(clients: Map<string, MemorydClient>, scenario: Scenario): Promise<void> {
  const vars = new Map<string, JsonValue>();
  for (const [n, st] of scenario.steps.entries()) {
    const where = `step ${n} (${st.rpc})`;
    const c = clients.get(st.client ?? "default")!;
    let result: Json;
    let code = "OK";
    let message = "";
    try {
      result =
        st.requests !== undefined
          ? await streaming(c, st.rpc, substitute(st.requests, vars) as JsonValue[])
          : await unary(c, st.rpc, substitute(st.request ?? {}, vars) as JsonValue);
    } catch (error) {
      if (!(error instanceof MemorydError)) throw error;
      code = error.code;
      message = error.message;
    }
    assert.equal(code, st.code ?? "OK", `${where}: ${message}`);
    if (st.message_contains !== undefined) {
      assert.ok(
        message.toLowerCase().includes(st.message_contains.toLowerCase()),
        `${where}: message ${JSON.stringify(message)} lacks ${JSON.stringify(st.message_contains)}`,
      );
    }
    for (const spec of st.checks ?? []) {
      const problem = check(result, substitute(spec, vars) as Obj);
      if (problem) assert.fail(`${where}: ${problem}\n${JSON.stringify(result)}`);
    }
    for (const [name, path] of Object.entries(st.save ?? {})) {
      const v = resolve(result, path);
      assert.ok(v !== undefined && v !== null && v !== "", `${where}: nothing at ${path} to save as ${name}`);
      vars.set(name, v as JsonValue);
    }
  }
}

const json = <D extends DescMessage>(schema: D, message: Parameters<typeof toJson<D>>[1]): JsonValue =>
  toJson(schema, message, { alwaysEmitImplicit: true });

async function unary(c: MemorydClient, rpc: string, req: JsonValue): Promise<Json> {
  switch (rpc) {
    case "MemoryService.Store":
      return json(StoreResponseSchema, await c.store(fromJson(StoreRequestSchema, req)));
    case "MemoryService.Recall":
      return json(RecallResponseSchema, await c.recall(fromJson(RecallRequestSchema, req)));
    case "MemoryService.Forget":
      return json(ForgetResponseSchema, await c.forget(fromJson(ForgetRequestSchema, req)));
    case "MemoryService.Update":
      return json(UpdateResponseSchema, await c.update(fromJson(UpdateRequestSchema, req)));
    case "MemoryService.Get": {
      const memory = await c.get(fromJson(GetRequestSchema, req));
      return json(GetResponseSchema, create(GetResponseSchema, { memory }));
    }
    case "MemoryService.List":
      return json(ListResponseSchema, await c.list(fromJson(ListRequestSchema, req)));
    case "MemoryService.Stats":
      return json(StatsResponseSchema, await c.stats(fromJson(StatsRequestSchema, req)));
    case "MemoryService.ListConflicts": {
      const conflicts = await c.listConflicts(fromJson(ListConflictsRequestSchema, req));
      return json(ListConflictsResponseSchema, create(ListConflictsResponseSchema, { conflicts }));
    }
    case "MemoryService.Export": {
      const memories: JsonValue[] = [];
      for await (const m of c.export(fromJson(ExportRequestSchema, req), { timeoutMs: 30_000 })) {
        memories.push(json(MemorySchema, m));
      }
      return { memories };
    }
    case "HookService.BuildContext":
      return json(BuildContextResponseSchema, await c.buildContext(fromJson(BuildContextRequestSchema, req)));
    case "HookService.Capture":
      return json(CaptureResponseSchema, await c.capture(fromJson(CaptureRequestSchema, req)));
    default:
      throw new Error(`the TypeScript runner does not know ${rpc}`);
  }
}

async function streaming(c: MemorydClient, rpc: string, reqs: JsonValue[]): Promise<Json> {
  if (rpc === "MemoryService.Import") {
    const parsed = reqs.map((r) => fromJson(ImportRequestSchema, r));
    const agentId = parsed[0]?.agentId ?? "";
    const memories = parsed.flatMap((r) => (r.memory ? [r.memory] : []));
    return json(ImportResponseSchema, await c.importMemories({ agentId, memories }, { timeoutMs: 30_000 }));
  }
  if (rpc === "MemoryService.Stream") {
    const session = c.stream({ timeoutMs: 30_000 });
    // Every StreamResponse as it arrives, the per-op errors included.
    const answers = session[Symbol.asyncIterator]();
    for (const r of reqs) {
      const op = fromJson(StreamRequestSchema, r);
      // Each op's own promise settles too; the responses are read from the iterator.
      session.send(op.op as StreamOp, op.requestId).catch(() => undefined);
    }
    const closing = session.close();
    closing.catch(() => undefined);
    const responses: Obj = {};
    for (;;) {
      const next = await answers.next().catch((e: unknown) => Promise.reject(MemorydError.from(e)));
      if (next.done) break;
      responses[next.value.requestId] = json(StreamResponseSchema, next.value);
    }
    await closing;
    return { responses };
  }
  throw new Error(`the TypeScript runner does not know ${rpc}`);
}

function substitute(value: Json, vars: Map<string, JsonValue>): Json {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Za-z0-9_]+)\}/g, (_, name: string) => {
      if (!vars.has(name)) throw new Error(`\${${name}} was never saved`);
      return String(vars.get(name));
    });
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, vars) as JsonValue);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars) as JsonValue]));
  }
  return value;
}

/** The value at path; undefined when absent; an array when the path has [*]. */
function resolve(doc: Json, path: string): Json {
  let values: Json[] = [doc];
  let wild = false;
  for (const part of path.split(".")) {
    const m = /^([^[\]]*)((?:\[(?:\d+|\*)\])*)$/.exec(part);
    if (!m) throw new Error(`bad path ${path}`);
    const name = m[1]!;
    let next: Json[] = values.map((v) =>
      name === "" ? v : v !== null && typeof v === "object" && !Array.isArray(v) ? v[name] : undefined,
    );
    for (const idx of (m[2] ?? "").matchAll(/\[(\d+|\*)\]/g)) {
      const expanded: Json[] = [];
      for (const v of next) {
        if (!Array.isArray(v)) expanded.push(undefined);
        else if (idx[1] === "*") {
          wild = true;
          expanded.push(...v);
        } else expanded.push(v[Number(idx[1])]);
      }
      next = expanded;
    }
    values = next;
  }
  if (wild) return values.filter((v) => v !== undefined && v !== null) as JsonValue[];
  return values[0];
}

function num(v: Json): number | undefined {
  if (v === undefined || v === null) return 0;
  if (typeof v === "number") return v;
  if (typeof v === "string" && v.trim() !== "" && !Number.isNaN(Number(v))) return Number(v);
  return undefined;
}

function same(actual: Json, expected: Json): boolean {
  if (expected === null || expected === undefined) return actual === null || actual === undefined;
  if (typeof expected === "boolean") return (actual ?? false) === expected;
  if (typeof expected === "number") {
    const a = num(actual);
    return a !== undefined && Math.abs(a - expected) <= 1e-6 + 1e-5 * Math.abs(expected);
  }
  if (typeof expected === "string") return (actual ?? "") === expected;
  if (Array.isArray(expected)) {
    const a = actual ?? [];
    return Array.isArray(a) && a.length === expected.length && expected.every((e, i) => same(a[i], e));
  }
  const a = actual ?? {};
  if (typeof a !== "object" || a === null || Array.isArray(a)) return false;
  const keys = Object.keys(expected);
  return Object.keys(a).length === keys.length && keys.every((k) => same(a[k], expected[k]));
}

function contains(actual: Json, expected: Json): boolean {
  if (typeof actual === "string") return typeof expected === "string" && actual.includes(expected);
  if (Array.isArray(actual)) return actual.some((v) => same(v, expected));
  return false;
}

function length(v: Json): number {
  if (Array.isArray(v) || typeof v === "string") return v.length;
  if (v !== null && typeof v === "object") return Object.keys(v).length;
  return 0;
}

/** undefined when spec holds on result, else what is wrong. */
function check(result: Json, spec: Obj): string | undefined {
  const path = spec["path"] as string;
  const actual = resolve(result, path);
  for (const [op, want] of Object.entries(spec)) {
    let ok: boolean;
    switch (op) {
      case "path":
        continue;
      case "eq":
        ok = same(actual, want);
        break;
      case "ne":
        ok = !same(actual, want);
        break;
      case "len":
        ok = length(actual) === want;
        break;
      case "contains":
        ok = contains(actual, want);
        break;
      case "excludes":
        ok = !contains(actual, want);
        break;
      case "gte":
      case "lte": {
        const a = num(actual);
        ok = a !== undefined && (op === "gte" ? a >= (want as number) : a <= (want as number));
        break;
      }
      default:
        return `unknown check operator ${op}`;
    }
    if (!ok) return `${path} ${op} ${JSON.stringify(want)} failed: got ${JSON.stringify(actual)}`;
  }
  return undefined;
}
