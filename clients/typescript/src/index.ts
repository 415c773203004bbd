/**
 * @memoryd/client: the TypeScript client of memoryd for Node.
 *
 * The generated messages, enums and services of memoryd.v1 are re-exported here (names
 * are unique within a proto package); every generated module is also reachable as
 * `@memoryd/client/gen/memoryd/v1/<file>_pb`.
 */

export type {
  ApplyReviewInit,
  BuildContextInit,
  CallOptions,
  CaptureInit,
  ExportInit,
  ForgetInit,
  GetInit,
  ImportInit,
  ListConflictsInit,
  ListInit,
  MemorydClientOptions,
  MemoryInit,
  PrepareReviewInit,
  RecallInit,
  StatsInit,
  StoreInit,
  StreamOptions,
  UpdateInit,
} from "./client.js";
export {
  DEFAULT_ADDRESS,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_DOWN_FOR_MS,
  DEFAULT_TIMEOUT_MS,
  MemorydClient,
} from "./client.js";
export type { MemorydErrorCode, MemorydErrorOptions } from "./errors.js";
export {
  Cancelled,
  codeName,
  DataLoss,
  DeadlineExceeded,
  FailedPrecondition,
  Internal,
  InvalidArgument,
  MemorydError,
  NotFound,
  Overloaded,
  PermissionDenied,
  ResourceExhausted,
  Unauthenticated,
  Unavailable,
  Unimplemented,
  Unknown,
} from "./errors.js";
export type { RetryOptions } from "./retry.js";
export { DEFAULT_RETRY } from "./retry.js";
export { normalAddress, rendezvousOrder, weight } from "./routing.js";
export type { StreamOp } from "./session.js";
export type { TlsOptions } from "./tls.js";
export { MemorydSession } from "./session.js";
export * from "./gen/memoryd/v1/hooks_pb.js";
export * from "./gen/memoryd/v1/memory_pb.js";
export * from "./gen/memoryd/v1/review_pb.js";
