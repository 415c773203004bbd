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
import { MemorydSession } from "./session.js";
import type { TlsOptions } from "./tls.js";
import { tlsNodeOptions } from "./tls.js";
import { traceContext } from "./tracing.js";

export const DEFAULT_ADDRESS = "http://127.0.0.1:50051";
/** The default address when `tls` is on. */
const DEFAULT_TLS_ADDRESS = "https://127.0.0.1:50051";
export const DEFAULT_TIMEOUT_MS = 10_000;

export interface MemorydClientOptions {
  /**
   * The daemon: "http://host:port", "https://host:port", or "host:port" (scheme chosen
   * by `tls`). Default "127.0.0.1:50051" (http, or https with `tls`).
   */
  address?: string;
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

export class MemorydClient {
  readonly baseUrl: string;
  private readonly rpc: Client<typeof MemoryService>;
  private readonly hooks: Client<typeof HookService>;
  private readonly review: Client<typeof ReviewService>;
  private readonly sessions: Http2SessionManager;
  private readonly timeoutMs: number;
  private readonly retry: RetryOptions;

  constructor(options: MemorydClientOptions = {}) {
    const tls = options.tls;
    const secure = tls === undefined ? undefined : tls !== false;
    this.baseUrl = baseUrlOf(options.address ?? (secure ? DEFAULT_TLS_ADDRESS : DEFAULT_ADDRESS), secure);
    const nodeOptions = typeof tls === "object" ? { ...tlsNodeOptions(tls), ...options.nodeOptions } : options.nodeOptions;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retry =
      options.retry === false
        ? { ...DEFAULT_RETRY, maxAttempts: 1 }
        : { ...DEFAULT_RETRY, ...options.retry };
    const interceptors = [traceContext(), ...(options.interceptors ?? [])];
    if (options.token) interceptors.unshift(bearer(options.token));
    // Our own session manager, so close() can end the HTTP/2 connection.
    this.sessions = new Http2SessionManager(this.baseUrl, {}, nodeOptions);
    const transport = createGrpcTransport({
      baseUrl: this.baseUrl,
      sessionManager: this.sessions,
      interceptors,
    });
    this.rpc = createClient(MemoryService, transport);
    this.hooks = createClient(HookService, transport);
    this.review = createClient(ReviewService, transport);
  }

  /** Writes a memory. Retried on UNAVAILABLE only when it carries an idempotencyKey. */
  store(request: StoreInit, options?: CallOptions): Promise<StoreResponse> {
    const idempotent = Boolean(request.idempotencyKey);
    return this.call((o) => this.rpc.store(request, o), idempotent, options);
  }

  /** The memories most relevant to `query`, best first. */
  recall(request: RecallInit, options?: CallOptions): Promise<RecallResponse> {
    return this.call((o) => this.rpc.recall(request, o), true, options);
  }

  /** Deletes by id, or by a query that singles out one memory (else: candidates). */
  async forget(request: ForgetInit, options?: CallOptions): Promise<ForgetResponse> {
    const init = forgetInit(request);
    return this.call((o) => this.rpc.forget(init, o), false, options);
  }

  update(request: UpdateInit, options?: CallOptions): Promise<UpdateResponse> {
    return this.call((o) => this.rpc.update(request, o), false, options);
  }

  /** One memory by id; NOT_FOUND if it does not exist or the agent may not read it. */
  async get(request: GetInit, options?: CallOptions): Promise<Memory> {
    const response = await this.call((o) => this.rpc.get(request, o), true, options);
    if (!response.memory) throw MemorydError.of("INTERNAL", "the daemon sent no memory");
    return response.memory;
  }

  /** One page of the agent's memories, newest first. */
  list(request: ListInit, options?: CallOptions): Promise<ListResponse> {
    return this.call((o) => this.rpc.list(request, o), true, options);
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
    return this.call((o) => this.rpc.stats(request, o), true, options);
  }

  /** The conflict log: decisions that clash with another agent's, newest first. */
  async listConflicts(request: ListConflictsInit, options?: CallOptions): Promise<Conflict[]> {
    const response = await this.call((o) => this.rpc.listConflicts(request, o), true, options);
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
      yield* this.rpc.export(request, streamCallOptions(options, controller.signal));
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
      return await this.rpc.import(requests(), streamCallOptions(options, controller.signal));
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
    return this.call((o) => this.hooks.buildContext(request, o), false, options);
  }

  /**
   * After-turn hook (HookService.Capture): stores what the turn's user messages asked to
   * be remembered, with one decision (and its reason) per message. Never retried: it
   * writes, and a repeat could store again.
   */
  capture(request: CaptureInit, options?: CallOptions): Promise<CaptureResponse> {
    return this.call((o) => this.hooks.capture(request, o), false, options);
  }

  /**
   * Review proposals (ReviewService.Prepare) over what the agent may read: near
   * duplicates, conflicts, stale memories and the promotions asked for. Changes nothing.
   */
  reviewPrepare(request: PrepareReviewInit, options?: CallOptions): Promise<PrepareReviewResponse> {
    return this.call((o) => this.review.prepare(request, o), true, options);
  }

  /**
   * Applies approved review items (ReviewService.Apply), each re-validated and applied
   * whole, or reported as a conflict, a refusal or already applied.
   */
  reviewApply(request: ApplyReviewInit, options?: CallOptions): Promise<ApplyReviewResponse> {
    return this.call((o) => this.review.apply(request, o), true, options);
  }

  /**
   * Opens a Stream session: `await session.store({...})`, `await session.send(op)`,
   * then `await session.close()`. Sessions are never retried.
   */
  stream(options: StreamOptions = {}): MemorydSession {
    return new MemorydSession((requests, signal) => {
      const callOptions: ConnectCallOptions = { signal };
      if (options.timeoutMs !== undefined) callOptions.timeoutMs = options.timeoutMs;
      if (options.headers) callOptions.headers = options.headers;
      return this.rpc.stream(requests, callOptions);
    }, options.signal);
  }

  /** Closes the HTTP/2 connection; calls in flight fail. A later call reconnects. */
  close(): void {
    this.sessions.abort();
  }

  private call<T>(
    invoke: (options: ConnectCallOptions) => Promise<T>,
    idempotent: boolean,
    options: CallOptions = {},
  ): Promise<T> {
    return callWithRetries(
      ({ timeoutMs, signal }: Attempt) => {
        const o: ConnectCallOptions = {};
        if (timeoutMs !== undefined) o.timeoutMs = Math.max(1, Math.ceil(timeoutMs));
        if (signal) o.signal = signal;
        if (options.headers) o.headers = options.headers;
        return invoke(o);
      },
      {
        timeoutMs: options.timeoutMs ?? this.timeoutMs,
        signal: options.signal,
        idempotent,
        retry: this.retry,
      },
    );
  }
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
