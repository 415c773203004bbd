/**
 * MemorydClient: a small typed wrapper over the generated MemoryService.
 *
 * Requests are plain objects shaped like the proto messages (camelCase fields, e.g.
 * `{ agentId: "main", text: "..." }`), so new proto fields are usable without changing
 * this file. Every call has a deadline, may be aborted with an AbortSignal, and fails
 * only with MemorydError. Idempotent calls are retried on UNAVAILABLE (see retry.ts).
 *
 * The HookService calls (buildContext, capture) share the client's connection, token
 * and interceptors; they are never retried. So do the ReviewService calls (reviewPrepare,
 * reviewApply), which are retried like other idempotent calls (a second Apply of the same
 * items changes nothing).
 *
 * Fleets: `address` may be a list of daemons serving one store. Each call then goes to its
 * agent's daemon (rendezvous hashing of the agent id, the rule every memoryd client shares)
 * and fails over to the agent's next daemon as routing.ts states; every store and capture
 * then carries an idempotency key, made here when the request has none.
 *
 * Credentials: `token` is the API key (a bearer secret); `tls` gives the CA to trust and,
 * for mTLS, the client certificate (tls.ts). A request for an agent the credential may not
 * act for fails with PERMISSION_DENIED, a missing or unknown credential with
 * UNAUTHENTICATED; neither is retried.
 */

import type * as http2 from "node:http2";

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CallOptions as ConnectCallOptions, Client, Interceptor } from "@connectrpc/connect";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";

import { MemorydError } from "./errors.js";
import type { BuildContextResponse, CaptureResponse } from "./gen/memoryd/v1/hooks_pb.js";
import {
  BuildContextRequestSchema,
  CaptureRequestSchema,
  HookService,
} from "./gen/memoryd/v1/hooks_pb.js";
import type {
  Conflict,
  ForgetResponse,
  ImportResponse,
  ListResponse,
  Memory,
  RecallResponse,
  StatsResponse,
  StoreResponse,
  UpdateResponse,
} from "./gen/memoryd/v1/memory_pb.js";
import {
  ExportRequestSchema,
  ForgetRequestSchema,
  GetRequestSchema,
  ListConflictsRequestSchema,
  ListRequestSchema,
  MemoryService,
  MemorySchema,
  RecallRequestSchema,
  StatsRequestSchema,
  StoreRequestSchema,
  UpdateRequestSchema,
} from "./gen/memoryd/v1/memory_pb.js";
import type { ApplyReviewResponse, PrepareReviewResponse } from "./gen/memoryd/v1/review_pb.js";
import {
  ApplyReviewRequestSchema,
  PrepareReviewRequestSchema,
  ReviewService,
} from "./gen/memoryd/v1/review_pb.js";
import type { Attempt, RetryOptions } from "./retry.js";
import { callWithRetries, DEFAULT_RETRY } from "./retry.js";
import { checkAddresses, Fleet, newIdempotencyKey } from "./routing.js";
import { MemorydSession } from "./session.js";
import type { TlsOptions } from "./tls.js";
import { tlsNodeOptions } from "./tls.js";
import { traceContext } from "./tracing.js";

export const DEFAULT_ADDRESS = "http://127.0.0.1:50051";
/** The default address when `tls` is on. */
const DEFAULT_TLS_ADDRESS = "https://127.0.0.1:50051";
export const DEFAULT_TIMEOUT_MS = 10_000;
/** Over a fleet: the longest wait for a connection to one daemon before trying the next. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 1_000;
/** Over a fleet: how long a daemon that failed is skipped. */
export const DEFAULT_DOWN_FOR_MS = 2_000;

export interface MemorydClientOptions {
  /**
   * The daemon: "http://host:port", "https://host:port", or "host:port" (scheme chosen
   * by `tls`). Default "127.0.0.1:50051" (http, or https with `tls`). A list of daemons
   * serving one store routes each call by its agent id and fails over (see routing.ts).
   */
  address?: string | readonly string[];
  /** Over a fleet: the longest wait for a connection to one daemon, in ms. Default 1000. */
  connectTimeoutMs?: number;
  /** Over a fleet: how long a daemon that failed is skipped, in ms. Default 2000. */
  downForMs?: number;
  /**
   * TLS: `true` for https with Node's trusted roots, or the CA to trust and, for mTLS, this
   * client's certificate and key (PEM text or file paths, see TlsOptions). An object implies
   * https for an address given without a scheme. Default false.
   */
  tls?: boolean | TlsOptions;
  /**
   * The API key, sent on every call as `authorization: Bearer <token>`: a secret made by
   * `memoryd keys new` (listed by its hash in the daemon's keys file), or the daemon's
   * single MEMORYD_AUTH_TOKEN. Omit it when the daemon runs without auth, or when a client
   * certificate (`tls.cert`) is the credential; a key, when sent, decides alone.
   */
  token?: string;
  /** Default deadline of each call in ms, retries included. Default 10 000; Infinity for none. */
  timeoutMs?: number;
  /** Retries of idempotent calls on UNAVAILABLE; `false` disables them. */
  retry?: Partial<RetryOptions> | false;
  /** Options for node's http2.connect; they win over those `tls` gives. */
  nodeOptions?: http2.SecureClientSessionOptions;
  /** Extra connect-es interceptors, run on every call. */
  interceptors?: Interceptor[];
}

export interface CallOptions {
  /** Deadline of this call in ms, retries included; overrides the client's timeoutMs. */
  timeoutMs?: number;
  /** Aborting it cancels the call; it then fails with CANCELLED. */
  signal?: AbortSignal;
  /** Extra request metadata. */
  headers?: Record<string, string>;
}

export interface StreamOptions {
  /**
   * Deadline of the whole session (or export, or import) in ms. Default none: these
   * calls last as long as there is data.
   */
  timeoutMs?: number;
  /** Aborting it ends the call; pending ops fail with CANCELLED. */
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /**
   * Over a fleet, `stream()` goes to this agent's daemon (the agent whose ops the session
   * carries; export and import go to their request's agent). Default "".
   */
  agentId?: string;
}

export type StoreInit = MessageInitShape<typeof StoreRequestSchema>;
export type RecallInit = MessageInitShape<typeof RecallRequestSchema>;
export type UpdateInit = MessageInitShape<typeof UpdateRequestSchema>;
export type GetInit = MessageInitShape<typeof GetRequestSchema>;
export type ListInit = MessageInitShape<typeof ListRequestSchema>;
export type StatsInit = MessageInitShape<typeof StatsRequestSchema>;
export type ListConflictsInit = MessageInitShape<typeof ListConflictsRequestSchema>;
export type ExportInit = MessageInitShape<typeof ExportRequestSchema>;
/** A Memory to import: a Memory from `export()`, or a plain object of the same shape. */
export type MemoryInit = MessageInitShape<typeof MemorySchema>;
/** What `importMemories` sends: every memory under the importing agent's id. */
export interface ImportInit {
  /** The importing agent; every memory must be in a scope it may write. */
  agentId: string;
  /** Read lazily, one ImportRequest each, so an export can be piped straight in. */
  memories: Iterable<MemoryInit> | AsyncIterable<MemoryInit>;
}
export type BuildContextInit = MessageInitShape<typeof BuildContextRequestSchema>;
export type CaptureInit = MessageInitShape<typeof CaptureRequestSchema>;
export type PrepareReviewInit = MessageInitShape<typeof PrepareReviewRequestSchema>;
export type ApplyReviewInit = MessageInitShape<typeof ApplyReviewRequestSchema>;
/** The proto's oneof form, or the shorthand `{ agentId, id }` / `{ agentId, query }`. */
export type ForgetInit =
  | MessageInitShape<typeof ForgetRequestSchema>
  | { agentId: string; id: string; query?: never }
  | { agentId: string; query: string; id?: never };

/** One daemon: its connection and the three service clients over it. */
interface Endpoint {
  baseUrl: string;
  sessions: Http2SessionManager;
  rpc: Client<typeof MemoryService>;
  hooks: Client<typeof HookService>;
  review: Client<typeof ReviewService>;
}

export class MemorydClient {
  /** The (first) daemon's URL. */
  readonly baseUrl: string;
  /** Every daemon's URL, in the order given. */
  readonly baseUrls: readonly string[];
  private readonly endpoints: readonly Endpoint[];
  private readonly fleet: Fleet | undefined;
  private readonly connectTimeoutMs: number;
  private readonly timeoutMs: number;
  private readonly retry: RetryOptions;

  constructor(options: MemorydClientOptions = {}) {
    const tls = options.tls;
    const secure = tls === undefined ? undefined : tls !== false;
    const given = options.address ?? (secure ? DEFAULT_TLS_ADDRESS : DEFAULT_ADDRESS);
    const addresses = typeof given === "string" ? [given] : checkAddresses(given);
    this.baseUrls = addresses.map((address) => baseUrlOf(address, secure));
    this.baseUrl = this.baseUrls[0]!;
    const nodeOptions = typeof tls === "object" ? { ...tlsNodeOptions(tls), ...options.nodeOptions } : options.nodeOptions;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retry =
      options.retry === false
        ? { ...DEFAULT_RETRY, maxAttempts: 1 }
        : { ...DEFAULT_RETRY, ...options.retry };
    const interceptors = [traceContext(), ...(options.interceptors ?? [])];
    if (options.token) interceptors.unshift(bearer(options.token));
    this.endpoints = this.baseUrls.map((baseUrl) => endpointOf(baseUrl, nodeOptions, interceptors));
    this.fleet = addresses.length > 1 ? new Fleet(this.baseUrls, options.downForMs ?? DEFAULT_DOWN_FOR_MS) : undefined;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  }

  /**
   * Writes a memory. Retried on UNAVAILABLE only when it carries an idempotencyKey (over
   * a fleet it always does: the client makes one when the request has none).
   */
  store(request: StoreInit, options?: CallOptions): Promise<StoreResponse> {
    const keyed = this.keyed(request);
    const idempotent = Boolean(keyed.idempotencyKey);
    return this.call(keyed.agentId, (e, o) => e.rpc.store(keyed, o), idempotent, options);
  }

  /** The memories most relevant to `query`, best first. */
  recall(request: RecallInit, options?: CallOptions): Promise<RecallResponse> {
    return this.call(request.agentId, (e, o) => e.rpc.recall(request, o), true, options);
  }

  /** Deletes by id, or by a query that singles out one memory (else: candidates). */
  async forget(request: ForgetInit, options?: CallOptions): Promise<ForgetResponse> {
    const init = forgetInit(request);
    return this.call(init.agentId, (e, o) => e.rpc.forget(init, o), false, options);
  }

  update(request: UpdateInit, options?: CallOptions): Promise<UpdateResponse> {
    return this.call(request.agentId, (e, o) => e.rpc.update(request, o), false, options);
  }

  /** One memory by id; NOT_FOUND if it does not exist or the agent may not read it. */
  async get(request: GetInit, options?: CallOptions): Promise<Memory> {
    const response = await this.call(request.agentId, (e, o) => e.rpc.get(request, o), true, options);
    if (!response.memory) throw MemorydError.of("INTERNAL", "the daemon sent no memory");
    return response.memory;
  }

  /** One page of the agent's memories, newest first. */
  list(request: ListInit, options?: CallOptions): Promise<ListResponse> {
    return this.call(request.agentId, (e, o) => e.rpc.list(request, o), true, options);
  }

  /** Every memory matching `request`, page by page (each page has its own deadline). */
  async *listAll(request: ListInit, options?: CallOptions): AsyncGenerator<Memory, void, undefined> {
    let pageToken = request.pageToken ?? "";
    do {
      const page = await this.list({ ...request, pageToken }, options);
      yield* page.memories;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  stats(request: StatsInit, options?: CallOptions): Promise<StatsResponse> {
    return this.call(request.agentId, (e, o) => e.rpc.stats(request, o), true, options);
  }

  /** The conflict log: decisions that clash with another agent's, newest first. */
  async listConflicts(request: ListConflictsInit, options?: CallOptions): Promise<Conflict[]> {
    const response = await this.call(request.agentId, (e, o) => e.rpc.listConflicts(request, o), true, options);
    return response.conflicts;
  }

  /**
   * Every memory the agent may read, streamed one by one (no row cap). The call starts
   * on the first iteration; leaving the loop early cancels it. Not retried; the deadline
   * (default none) covers the whole export.
   */
  async *export(request: ExportInit, options: StreamOptions = {}): AsyncGenerator<Memory, void, undefined> {
    const controller = new AbortController();
    const unlink = follow(options.signal, controller);
    try {
      const endpoint = await this.pick(request.agentId);
      yield* endpoint.rpc.export(request, streamCallOptions(options, controller.signal));
    } catch (reason) {
      throw MemorydError.from(reason);
    } finally {
      unlink();
      controller.abort();
    }
  }

  /**
   * Streams memories (e.g. from `export()`) into the daemon, which re-embeds them and
   * keeps their ids, scopes, times and metadata. A memory whose id (or text, in its scope)
   * already exists is counted in `skippedExisting`; a refused one is reported in `errors`
   * and the others are still imported. Not retried; the deadline (default none) covers
   * the whole import.
   */
  async importMemories(request: ImportInit, options: StreamOptions = {}): Promise<ImportResponse> {
    const { agentId, memories } = request;
    async function* requests() {
      for await (const memory of memories) yield { agentId, memory };
    }
    const controller = new AbortController();
    const unlink = follow(options.signal, controller);
    try {
      const endpoint = await this.pick(agentId);
      return await endpoint.rpc.import(requests(), streamCallOptions(options, controller.signal));
    } catch (reason) {
      throw MemorydError.from(reason);
    } finally {
      unlink();
    }
  }

  /**
   * Before-prompt hook (HookService.BuildContext): the ready `<relevant-memories>` block
   * for a prompt, or an empty `context` and a `skippedReason` ("greeting", "too_short",
   * "no_relevant_memories", "time_budget_exceeded", ...). Never retried: the request's
   * `timeBudgetMs` is the daemon's budget, `timeoutMs` the caller's deadline.
   */
  buildContext(request: BuildContextInit, options?: CallOptions): Promise<BuildContextResponse> {
    // A read: over a fleet it fails over, but it is never retried after a back-off.
    return this.call(request.agentId, (e, o) => e.hooks.buildContext(request, o), true, options, false);
  }

  /**
   * After-turn hook (HookService.Capture): stores what the turn's user messages asked to
   * be remembered, with one decision (and its reason) per message. Never retried after a
   * back-off; over a fleet it carries an idempotency key (made here when the request has
   * none), so it fails over to the agent's next daemon without storing twice.
   */
  capture(request: CaptureInit, options?: CallOptions): Promise<CaptureResponse> {
    const keyed = this.keyed(request);
    const failover = Boolean(keyed.idempotencyKey);
    return this.call(keyed.agentId, (e, o) => e.hooks.capture(keyed, o), failover, options, false);
  }

  /**
   * Review proposals (ReviewService.Prepare) over what the agent may read: near
   * duplicates, conflicts, stale memories and the promotions asked for. Changes nothing.
   */
  reviewPrepare(request: PrepareReviewInit, options?: CallOptions): Promise<PrepareReviewResponse> {
    return this.call(request.agentId, (e, o) => e.review.prepare(request, o), true, options);
  }

  /**
   * Applies approved review items (ReviewService.Apply), each re-validated and applied
   * whole, or reported as a conflict, a refusal or already applied.
   */
  reviewApply(request: ApplyReviewInit, options?: CallOptions): Promise<ApplyReviewResponse> {
    return this.call(request.agentId, (e, o) => e.review.apply(request, o), true, options);
  }

  /**
   * Opens a Stream session: `await session.store({...})`, `await session.send(op)`,
   * then `await session.close()`. Sessions are never retried. Over a fleet the session goes
   * to `options.agentId`'s first daemon not marked down (it does not wait to connect).
   */
  stream(options: StreamOptions = {}): MemorydSession {
    const endpoint = this.endpoints[this.fleet?.order(options.agentId ?? "")[0] ?? 0]!;
    return new MemorydSession((requests, signal) => {
      const callOptions: ConnectCallOptions = { signal };
      if (options.timeoutMs !== undefined) callOptions.timeoutMs = options.timeoutMs;
      if (options.headers) callOptions.headers = options.headers;
      return endpoint.rpc.stream(requests, callOptions);
    }, options.signal);
  }

  /** Closes the HTTP/2 connections; calls in flight fail. A later call reconnects. */
  close(): void {
    for (const endpoint of this.endpoints) endpoint.sessions.abort();
  }

  /** The request with an idempotency key: its own, or over a fleet a new one. */
  private keyed<R extends { idempotencyKey?: string }>(request: R): R {
    if (!this.fleet || request.idempotencyKey) return request;
    return { ...request, idempotencyKey: newIdempotencyKey() };
  }

  /**
   * `invoke` on the agent's daemon: failing over when `idempotent`, and retried after a
   * back-off on UNAVAILABLE when `again` too.
   */
  private call<T>(
    agentId: string | undefined,
    invoke: (endpoint: Endpoint, options: ConnectCallOptions) => Promise<T>,
    idempotent: boolean,
    options: CallOptions = {},
    again = true,
  ): Promise<T> {
    return callWithRetries(
      ({ timeoutMs, signal }: Attempt) => {
        const o: ConnectCallOptions = {};
        if (timeoutMs !== undefined) o.timeoutMs = Math.max(1, Math.ceil(timeoutMs));
        if (signal) o.signal = signal;
        if (options.headers) o.headers = options.headers;
        return this.route(agentId ?? "", (endpoint) => invoke(endpoint, o), idempotent);
      },
      {
        timeoutMs: options.timeoutMs ?? this.timeoutMs,
        signal: options.signal,
        idempotent: idempotent && again,
        retry: this.retry,
      },
    );
  }

  /** One pass over the agent's daemons, until one answers (routing.ts has the rule). */
  private async route<T>(agentId: string, send: (endpoint: Endpoint) => Promise<T>, idempotent: boolean): Promise<T> {
    const fleet = this.fleet;
    if (!fleet) return send(this.endpoints[0]!);
    let failed: MemorydError | undefined;
    for (const i of fleet.order(agentId)) {
      const endpoint = this.endpoints[i]!;
      if (!(await this.connected(endpoint))) {
        fleet.markDown(i); // nothing was sent: any call may go on
        failed = this.noConnection(endpoint);
        continue;
      }
      try {
        const response = await send(endpoint);
        fleet.markUp(i);
        return response;
      } catch (reason) {
        const error = MemorydError.from(reason);
        if (error.code !== "UNAVAILABLE") throw error;
        fleet.markDown(i);
        if (!idempotent) throw error; // it may have reached the daemon: never sent again
        failed = error;
      }
    }
    throw failed!;
  }

  /** The daemon for a streaming call (never sent again once it starts). */
  private async pick(agentId: string | undefined): Promise<Endpoint> {
    const fleet = this.fleet;
    if (!fleet) return this.endpoints[0]!;
    let endpoint: Endpoint | undefined;
    for (const i of fleet.order(agentId ?? "")) {
      endpoint = this.endpoints[i]!;
      if (await this.connected(endpoint)) return endpoint;
      fleet.markDown(i);
    }
    throw this.noConnection(endpoint!);
  }

  /** Connected to `endpoint`, or connected within connectTimeoutMs. */
  private async connected(endpoint: Endpoint): Promise<boolean> {
    const state = endpoint.sessions.state();
    if (state === "open" || state === "idle") return true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((done) => (timer = setTimeout(() => done("late"), this.connectTimeoutMs)));
    try {
      const outcome = await Promise.race([endpoint.sessions.connect(), late]);
      return outcome === "open" || outcome === "idle";
    } finally {
      clearTimeout(timer);
    }
  }

  private noConnection(endpoint: Endpoint): MemorydError {
    const cause = endpoint.sessions.error();
    const why = cause instanceof Error ? `: ${cause.message}` : "";
    return MemorydError.of(
      "UNAVAILABLE",
      `no connection to the daemon at ${endpoint.baseUrl} (refused, or none within connectTimeoutMs ${this.connectTimeoutMs})${why}`,
    );
  }
}

function endpointOf(
  baseUrl: string,
  nodeOptions: http2.SecureClientSessionOptions | undefined,
  interceptors: Interceptor[],
): Endpoint {
  // Our own session manager, so close() can end the HTTP/2 connection.
  const sessions = new Http2SessionManager(baseUrl, {}, nodeOptions);
  const transport = createGrpcTransport({ baseUrl, sessionManager: sessions, interceptors });
  return {
    baseUrl,
    sessions,
    rpc: createClient(MemoryService, transport),
    hooks: createClient(HookService, transport),
    review: createClient(ReviewService, transport),
  };
}

/** "host:port" gets a scheme from `tls`; an explicit scheme must agree with it. */
export function baseUrlOf(address: string, tls?: boolean): string {
  const match = /^(https?):\/\//i.exec(address);
  if (!match) return `${tls ? "https" : "http"}://${address}`;
  const secure = match[1]!.toLowerCase() === "https";
  if (tls !== undefined && tls !== secure) {
    throw new TypeError(`address ${address} contradicts tls: ${tls}`);
  }
  return address;
}

/** Connect options of a streaming call (no default deadline). */
function streamCallOptions(options: StreamOptions, signal: AbortSignal): ConnectCallOptions {
  const callOptions: ConnectCallOptions = { signal };
  if (options.timeoutMs !== undefined && Number.isFinite(options.timeoutMs)) {
    callOptions.timeoutMs = Math.max(1, Math.ceil(options.timeoutMs));
  }
  if (options.headers) callOptions.headers = options.headers;
  return callOptions;
}

/** Aborts `controller` when `signal` does; returns the function that stops following. */
function follow(signal: AbortSignal | undefined, controller: AbortController): () => void {
  if (!signal) return () => undefined;
  if (signal.aborted) {
    controller.abort(signal.reason);
    return () => undefined;
  }
  const abort = (): void => controller.abort(signal.reason);
  signal.addEventListener("abort", abort, { once: true });
  return () => signal.removeEventListener("abort", abort);
}

function bearer(token: string): Interceptor {
  return (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
}

function forgetInit(request: ForgetInit): MessageInitShape<typeof ForgetRequestSchema> {
  if (!("id" in request) && !("query" in request)) {
    return request as MessageInitShape<typeof ForgetRequestSchema>;
  }
  const { agentId, id, query } = request as { agentId: string; id?: string; query?: string };
  if (Boolean(id) === Boolean(query)) {
    throw MemorydError.of("INVALID_ARGUMENT", "forget needs exactly one of id or query");
  }
  return id
    ? { agentId, target: { case: "id", value: id } }
    : { agentId, target: { case: "query", value: query! } };
}
