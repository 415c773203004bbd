/**
 * Deadlines and retries of one unary call.
 *
 * The deadline covers the whole call, retries and back-off included, so `timeoutMs` is
 * the most a caller ever waits. Idempotent calls are retried on UNAVAILABLE (the daemon
 * is starting, restarting, or not listening yet). Any call refused with RESOURCE_EXHAUSTED
 * and a `retry-after-ms` trailer (a rate limit or a full queue: nothing was done) is sent
 * again after that wait.
 */

import { setTimeout as sleep } from "node:timers/promises";

import { isRetryable, MemorydError } from "./errors.js";

export interface RetryOptions {
  /** Attempts in all, the first included; 1 disables retries. Default 4. */
  maxAttempts: number;
  /** Back-off before the second attempt; doubled after each retry. Default 100 ms. */
  initialBackoffMs: number;
  /** Upper bound of one back-off. Default 2000 ms. */
  maxBackoffMs: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  maxAttempts: 4,
  initialBackoffMs: 100,
  maxBackoffMs: 2_000,
};

/** What one attempt is given: the time left until the deadline, and the caller's signal. */
export interface Attempt {
  timeoutMs: number | undefined;
  signal: AbortSignal | undefined;
}

export interface CallPolicy {
  /** Deadline of the whole call in ms; Infinity for none. */
  timeoutMs: number;
  signal: AbortSignal | undefined;
  idempotent: boolean;
  retry: RetryOptions;
}

export async function callWithRetries<T>(
  attempt: (a: Attempt) => Promise<T>,
  policy: CallPolicy,
): Promise<T> {
  const { timeoutMs, signal, retry } = policy;
  const deadline = Number.isFinite(timeoutMs) ? Date.now() + timeoutMs : Infinity;
  const attempts = Math.max(1, retry.maxAttempts);
  let backoff = retry.initialBackoffMs;
  for (let n = 1; ; n++) {
    const left = deadline - Date.now();
    if (left <= 0) {
      throw MemorydError.of("DEADLINE_EXCEEDED", `deadline of ${timeoutMs} ms exceeded`);
    }
    let error: MemorydError;
    try {
      return await attempt({ timeoutMs: Number.isFinite(left) ? left : undefined, signal });
    } catch (reason) {
      error = MemorydError.from(reason);
    }
    const told = error.retryAfterMs;
    if (n >= attempts || (told === undefined && !(policy.idempotent && isRetryable(error)))) {
      throw error;
    }
    // "Equal jitter": between half and all of the back-off, so clients that lost the
    // daemon together do not come back in lockstep.
    const delay = told ?? Math.min(backoff, retry.maxBackoffMs) * (0.5 + Math.random() / 2);
    // No time for another attempt: the real cause is more useful than a bare timeout.
    if (Date.now() + delay >= deadline) throw error;
    try {
      await sleep(delay, undefined, { signal });
    } catch (reason) {
      throw MemorydError.of("CANCELLED", "the call was aborted by its signal", {
        cause: reason,
      });
    }
    backoff *= 2;
  }
}
