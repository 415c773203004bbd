/**
 * The caller's OpenTelemetry trace context, sent with every call.
 *
 * Each call carries the active context (`context.active()`) in its metadata through the
 * application's registered propagator: W3C `traceparent` and `tracestate` with the
 * OpenTelemetry SDK's defaults. The daemon's span of the call is then a child of the
 * caller's span. With no SDK registered, `@opentelemetry/api` is a no-op and nothing is
 * sent. Only the propagator's own headers are added, never request content.
 */

import type { Interceptor } from "@connectrpc/connect";
import { context, propagation } from "@opentelemetry/api";

const headerSetter = {
  set(carrier: Headers, key: string, value: string): void {
    carrier.set(key, value);
  },
};

/** A connect-es interceptor adding the active trace context to each call's headers. */
export function traceContext(): Interceptor {
  return (next) => (request) => {
    propagation.inject(context.active(), request.header, headerSetter);
    return next(request);
  };
}
