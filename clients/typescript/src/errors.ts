/**
 * The one error type of the client, and the one place transport failures become it.
 *
 *   Error
 *   └── MemorydError   .code    gRPC status name, e.g. "INVALID_ARGUMENT"
 *                      .message the daemon's text, as sent
 *
 * Every failure a caller can see (a unary call, a Stream op, the Stream itself, a
 * deadline, an abort, a refused connection) is a MemorydError.
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

  constructor(
    code: MemorydErrorCode,
    message: string,
    options?: { cause?: unknown; retryAfterMs?: number },
  ) {
    super(message, options);
    this.code = code;
    this.retryAfterMs = options?.retryAfterMs;
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
      return new MemorydError("UNAVAILABLE", `TLS with memoryd failed: ${tls.message} (${tls.code})`, { cause: reason });
    }
    if (err.code === Code.Canceled && err.rawMessage === PEER_CLOSED) {
      return new MemorydError(
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
    return new MemorydError(code, err.rawMessage, { cause: reason, retryAfterMs });
  }
}

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
