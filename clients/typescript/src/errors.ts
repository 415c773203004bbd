/**
 * The client's exception tree, and the one place transport failures become it.
 *
 *   Error
 *   └── MemorydError            .code (gRPC status name), .status (its number), .message
 *       │                       (the daemon's text), .retryAfterMs, .metadata (trailers)
 *       ├── InvalidArgument     bad input; nothing was changed (the message says what to fix)
 *       ├── NotFound            no such memory, or not one this agent may see
 *       ├── PermissionDenied    the credential may not act for that agent or scope
 *       ├── Unauthenticated     missing or wrong credential
 *       ├── FailedPrecondition  valid, but the daemon's state forbids it (a closed session)
 *       ├── ResourceExhausted   a rate limit or a full queue (.retryAfterMs set: nothing was
 *       │                       done) or a full disk; also exported as Overloaded
 *       ├── Unavailable         no daemon at the address, it is starting or stopping, TLS failed
 *       ├── DeadlineExceeded    the call did not finish within its deadline
 *       ├── DataLoss            stored data cannot be read
 *       ├── Cancelled           the call was aborted by its signal
 *       ├── Unimplemented       the daemon does not know this RPC (an older daemon)
 *       ├── Internal            a bug in the daemon; the message names an incident id
 *       └── Unknown             a status the daemon did not set
 *
 * It mirrors the daemon's tree (memoryd/core/errors.py) through the status codes the daemon
 * maps it to. Every failure a caller can see (a unary call, a Stream op, the Stream itself,
 * a deadline, an abort, a refused connection) is a MemorydError of the class of its code
 * (`MemorydError.of` picks it), so `instanceof MemorydError` and `.code` checks keep working.
 */

import { Code, ConnectError } from "@connectrpc/connect";

/** gRPC status names, indexed by status number (0..16). */
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

export type MemorydErrorCode = Exclude<(typeof CODE_NAMES)[number], "OK">;

/** The gRPC status name of a status number; UNKNOWN for anything out of range. */
export function codeName(status: number): MemorydErrorCode {
  const name = CODE_NAMES[status];
  return name === undefined || name === "OK" ? "UNKNOWN" : name;
}

export interface MemorydErrorOptions {
  cause?: unknown;
  retryAfterMs?: number;
  /** The response's headers and trailers, as the transport reported them. */
  metadata?: Headers;
}

export class MemorydError extends Error {
  override readonly name = "MemorydError";
  /** The gRPC status name, e.g. "INVALID_ARGUMENT", "NOT_FOUND", "UNAVAILABLE". */
  readonly code: MemorydErrorCode;
  /**
   * With RESOURCE_EXHAUSTED from a rate limit or a full queue: how long the daemon asked
   * the caller to wait (trailer `retry-after-ms`). Nothing was done, so the same call may
   * be sent again, idempotent or not; the client does, within its deadline.
   */
  readonly retryAfterMs: number | undefined;
  /** The response's headers and trailers (empty when no response came). */
  readonly metadata: Headers;

  constructor(code: MemorydErrorCode, message: string, options?: MemorydErrorOptions) {
    super(message, options);
    this.code = code;
    this.retryAfterMs = options?.retryAfterMs;
    this.metadata = options?.metadata ?? new Headers();
  }

  /** A MemorydError of the subclass for `code` (NotFound for NOT_FOUND, ...). */
  static of(code: MemorydErrorCode, message: string, options?: MemorydErrorOptions): MemorydError {
    const cls = ERROR_CLASSES[code];
    return cls ? new cls(message, options) : new MemorydError(code, message, options);
  }

  /** The gRPC status number of `code` (3 for INVALID_ARGUMENT, ...). */
  get status(): number {
    return CODE_NAMES.indexOf(this.code);
  }

  override toString(): string {
    return `MemorydError [${this.code}]: ${this.message}`;
  }

  /**
   * Any thrown value as a MemorydError (a ConnectError keeps its code and raw text).
   * Connection failures are UNAVAILABLE, as in gRPC's own clients: a failed TLS
   * handshake (connect-es says INTERNAL), and a connection the daemon closed before
   * answering (connect-es says CANCELLED, which means the caller gave up).
   */
  static from(reason: unknown): MemorydError {
    if (reason instanceof MemorydError) return reason;
    const err = ConnectError.from(reason);
    const tls = tlsFailure(reason);
    if (tls) {
      return MemorydError.of("UNAVAILABLE", `TLS with memoryd failed: ${tls.message} (${tls.code})`, { cause: reason });
    }
    if (err.code === Code.Canceled && err.rawMessage === PEER_CLOSED) {
      return MemorydError.of(
        "UNAVAILABLE",
        "memoryd closed the connection before answering (it stopped, or it requires a client " +
          "certificate (mTLS) and refused this client's: check tls.cert and tls.key)",
        { cause: reason },
      );
    }
    // connect-es numbers its Code enum exactly like gRPC statuses.
    const code = codeName(err.code);
    const after = Number(err.metadata.get("retry-after-ms") ?? NaN);
    const retryAfterMs =
      code === "RESOURCE_EXHAUSTED" && Number.isFinite(after) && after >= 0
        ? Math.min(after, 30_000)
        : undefined;
    return MemorydError.of(code, err.rawMessage, { cause: reason, retryAfterMs, metadata: err.metadata });
  }
}

export type ErrorClass = new (message: string, options?: MemorydErrorOptions) => MemorydError;

/** A subclass of MemorydError for one status code. */
function statusClass(code: MemorydErrorCode): ErrorClass {
  return class extends MemorydError {
    constructor(message: string, options?: MemorydErrorOptions) {
      super(code, message, options);
    }
  };
}

export class InvalidArgument extends statusClass("INVALID_ARGUMENT") {}
export class NotFound extends statusClass("NOT_FOUND") {}
export class PermissionDenied extends statusClass("PERMISSION_DENIED") {}
export class Unauthenticated extends statusClass("UNAUTHENTICATED") {}
export class FailedPrecondition extends statusClass("FAILED_PRECONDITION") {}
export class ResourceExhausted extends statusClass("RESOURCE_EXHAUSTED") {}
/** The daemon's name for a refused call it asks to be sent again (`retryAfterMs`). */
export const Overloaded = ResourceExhausted;
export type Overloaded = ResourceExhausted;
export class Unavailable extends statusClass("UNAVAILABLE") {}
export class DeadlineExceeded extends statusClass("DEADLINE_EXCEEDED") {}
export class DataLoss extends statusClass("DATA_LOSS") {}
export class Cancelled extends statusClass("CANCELLED") {}
export class Unimplemented extends statusClass("UNIMPLEMENTED") {}
export class Internal extends statusClass("INTERNAL") {}
export class Unknown extends statusClass("UNKNOWN") {}

/** Each status code's class; a code not here (ALREADY_EXISTS, ABORTED, OUT_OF_RANGE:
 * memoryd sends none of them) is a plain MemorydError. */
const ERROR_CLASSES: Partial<Record<MemorydErrorCode, ErrorClass>> = {
  INVALID_ARGUMENT: InvalidArgument,
  NOT_FOUND: NotFound,
  PERMISSION_DENIED: PermissionDenied,
  UNAUTHENTICATED: Unauthenticated,
  FAILED_PRECONDITION: FailedPrecondition,
  RESOURCE_EXHAUSTED: ResourceExhausted,
  UNAVAILABLE: Unavailable,
  DEADLINE_EXCEEDED: DeadlineExceeded,
  DATA_LOSS: DataLoss,
  CANCELLED: Cancelled,
  UNIMPLEMENTED: Unimplemented,
  INTERNAL: Internal,
  UNKNOWN: Unknown,
};

/** connect-node's text for a stream that ended with its connection (RST code CANCEL). */
const PEER_CLOSED = "http/2 stream closed with error code CANCEL (0x8)";

/** Node's codes for a TLS handshake or certificate check that failed. */
const TLS_CODES = /^(ERR_SSL_|ERR_TLS_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|CERT_|HOSTNAME_MISMATCH|EPROTO$)/;

/** The TLS error in `reason`'s cause chain, if any. */
function tlsFailure(reason: unknown): { code: string; message: string } | undefined {
  const seen = new Set<unknown>();
  for (let e = reason; e instanceof Error && !seen.has(e); e = e.cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && TLS_CODES.test(code)) return { code, message: e.message };
  }
  return undefined;
}

/** True for the statuses a retry may cure: the daemon is starting, restarting or away. */
export function isRetryable(error: MemorydError): boolean {
  return error.code === "UNAVAILABLE";
}
