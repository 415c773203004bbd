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

import { ConnectError } from "@connectrpc/connect";

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

  constructor(code: MemorydErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** The gRPC status number of `code` (3 for INVALID_ARGUMENT, ...). */
  get status(): number {
    return CODE_NAMES.indexOf(this.code);
  }

  override toString(): string {
    return `MemorydError [${this.code}]: ${this.message}`;
  }

  /** Any thrown value as a MemorydError (a ConnectError keeps its code and raw text). */
  static from(reason: unknown): MemorydError {
    if (reason instanceof MemorydError) return reason;
    const err = ConnectError.from(reason);
    // connect-es numbers its Code enum exactly like gRPC statuses.
    return new MemorydError(codeName(err.code), err.rawMessage, { cause: reason });
  }
}

/** True for the statuses a retry may cure: the daemon is starting, restarting or away. */
export function isRetryable(error: MemorydError): boolean {
  return error.code === "UNAVAILABLE";
}
