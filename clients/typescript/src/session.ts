/**
 * A Stream session: one long-lived bidirectional call carrying many ops.
 *
 * `send(op)` writes a StreamRequest with a fresh request_id and returns a promise
 * settled by the response carrying the same id: resolved with the StreamResponse, or
 * rejected with a MemorydError when the daemon answered that op with an Error (the
 * session goes on). If the stream as a whole fails (auth, deadline, abort, the daemon
 * going away), every pending and later op rejects with that error.
 *
 * The session is also an AsyncIterable of every StreamResponse that arrives while an
 * iterator is open, for callers who would rather consume responses in arrival order.
 */

import type { MessageInitShape } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";

import { codeName, MemorydError } from "./errors.js";
import type {
  ForgetResponse,
  RecallResponse,
  StoreResponse,
  StreamRequest,
  StreamResponse,
  UpdateResponse,
} from "./gen/memoryd/v1/memory_pb.js";
import {
  ForgetRequestSchema,
  RecallRequestSchema,
  StoreRequestSchema,
  StreamRequestSchema,
  UpdateRequestSchema,
} from "./gen/memoryd/v1/memory_pb.js";

/** One op of a StreamRequest, e.g. `{ case: "store", value: { agentId, text } }`. */
export type StreamOp = Exclude<MessageInitShape<typeof StreamRequestSchema>["op"], undefined>;

/** Opens the underlying call: requests in, responses out. */
export type OpenStream = (
  requests: AsyncIterable<StreamRequest>,
  signal: AbortSignal,
) => AsyncIterable<StreamResponse>;

interface Pending {
  resolve(response: StreamResponse): void;
  reject(error: MemorydError): void;
}

/** An unbounded single-consumer queue that is also an AsyncIterable. */
class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private closed = false;
  private error: unknown;

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.notify();
  }

  close(error?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.error = error;
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        yield item;
      } else if (this.closed) {
        if (this.error !== undefined) throw this.error;
        return;
      } else {
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    }
  }
}

export class MemorydSession implements AsyncIterable<StreamResponse> {
  private readonly requests = new Channel<StreamRequest>();
  private readonly pending = new Map<string, Pending>();
  private readonly listeners = new Set<Channel<StreamResponse>>();
  private readonly controller = new AbortController();
  private readonly finished: Promise<void>;
  private failure: MemorydError | undefined;
  private ended = false;
  private closing = false;
  private nextId = 0;

  /** @internal Use MemorydClient.stream(). */
  constructor(open: OpenStream, signal?: AbortSignal) {
    if (signal) {
      if (signal.aborted) this.controller.abort(signal.reason);
      else signal.addEventListener("abort", () => this.controller.abort(signal.reason), { once: true });
    }
    this.finished = this.pump(open(this.requests, this.controller.signal));
  }

  /** Sends one op; resolves with its response, rejects with a MemorydError. */
  send(op: StreamOp, requestId?: string): Promise<StreamResponse> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.ended || this.closing) {
      return Promise.reject(MemorydError.of("FAILED_PRECONDITION", "the session is closed"));
    }
    const id = requestId ?? String(++this.nextId);
    if (this.pending.has(id)) {
      return Promise.reject(
        MemorydError.of("INVALID_ARGUMENT", `request_id ${JSON.stringify(id)} is already in flight`),
      );
    }
    return new Promise<StreamResponse>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.requests.push(create(StreamRequestSchema, { requestId: id, op }));
    });
  }

  async store(init: MessageInitShape<typeof StoreRequestSchema>): Promise<StoreResponse> {
    const r = await this.send({ case: "store", value: create(StoreRequestSchema, init) });
    return expect(r, "store");
  }

  async recall(init: MessageInitShape<typeof RecallRequestSchema>): Promise<RecallResponse> {
    const r = await this.send({ case: "recall", value: create(RecallRequestSchema, init) });
    return expect(r, "recall");
  }

  async forget(init: MessageInitShape<typeof ForgetRequestSchema>): Promise<ForgetResponse> {
    const r = await this.send({ case: "forget", value: create(ForgetRequestSchema, init) });
    return expect(r, "forget");
  }

  async update(init: MessageInitShape<typeof UpdateRequestSchema>): Promise<UpdateResponse> {
    const r = await this.send({ case: "update", value: create(UpdateRequestSchema, init) });
    return expect(r, "update");
  }

  /** Ops sent and not answered yet. */
  get inFlight(): number {
    return this.pending.size;
  }

  /**
   * Half-closes the session: no more ops; resolves once every op sent so far has been
   * answered and the daemon has ended the stream. Rejects if the stream failed.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.requests.close();
    await this.finished;
    if (this.failure && this.failure.code !== "CANCELLED") throw this.failure;
  }

  /** Cancels the stream at once; pending ops reject with CANCELLED. */
  abort(reason?: unknown): void {
    this.controller.abort(reason);
  }

  /** Every StreamResponse that arrives from now until the stream ends. */
  [Symbol.asyncIterator](): AsyncIterator<StreamResponse> {
    const channel = new Channel<StreamResponse>();
    if (this.ended) channel.close(this.failure);
    else this.listeners.add(channel);
    const inner = channel[Symbol.asyncIterator]();
    const listeners = this.listeners;
    return {
      next: () => inner.next(),
      return: async () => {
        listeners.delete(channel);
        return inner.return();
      },
    };
  }

  private async pump(responses: AsyncIterable<StreamResponse>): Promise<void> {
    try {
      for await (const response of responses) this.dispatch(response);
      this.finish(undefined);
    } catch (reason) {
      this.finish(MemorydError.from(reason));
    }
  }

  private dispatch(response: StreamResponse): void {
    const waiter = this.pending.get(response.requestId);
    if (waiter) {
      this.pending.delete(response.requestId);
      const { result } = response;
      if (result.case === "error") {
        // The status number is authoritative; code_name only restates it.
        waiter.reject(MemorydError.of(codeName(result.value.code), result.value.message));
      } else {
        waiter.resolve(response);
      }
    }
    for (const listener of this.listeners) listener.push(response);
  }

  private finish(error: MemorydError | undefined): void {
    this.ended = true;
    this.failure = error;
    this.requests.close();
    const orphaned =
      error ??
      MemorydError.of("UNKNOWN", "the daemon ended the stream without answering this op");
    for (const waiter of this.pending.values()) waiter.reject(orphaned);
    this.pending.clear();
    for (const listener of this.listeners) listener.close(error);
    this.listeners.clear();
  }
}

type Results = StreamResponse["result"];
type ResultOf<K extends Results["case"]> = Extract<Results, { case: K }>["value"];

function expect<K extends Exclude<Results["case"], "error" | undefined>>(
  response: StreamResponse,
  kind: K,
): ResultOf<K> {
  if (response.result.case !== kind) {
    throw MemorydError.of(
      "INTERNAL",
      `expected a ${kind} result for request ${response.requestId}, got ${response.result.case ?? "none"}`,
    );
  }
  return response.result.value as ResultOf<K>;
}
