import { ErrorCode } from './errors';

/**
 * The one HTTP status for each domain error code, for every REST API llmgw serves (catalog and
 * controller admin). Chosen after the gRPC→HTTP mapping of google.rpc.Code, so the same failure
 * reads alike on both transports:
 * - PermissionDenied is 403: the caller is known but may not do this (a missing or wrong
 *   credential is Unauthenticated, 401).
 * - Unplaceable is 422: the request is well formed, and the fleet cannot satisfy it.
 * - ResourceExhausted is 429: a limit refused it, and the same request later may pass.
 * - Fenced is 503: this process lost its claim to write mid-request; the caller did nothing
 *   wrong and a retry (against the leader) succeeds, so it is not a 409 conflict.
 */
export const HTTP_STATUS_OF: Readonly<Record<ErrorCode, number>> = {
  [ErrorCode.InvalidArgument]: 400,
  [ErrorCode.Unauthenticated]: 401,
  [ErrorCode.PermissionDenied]: 403,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.PreconditionFailed]: 412,
  [ErrorCode.Unplaceable]: 422,
  [ErrorCode.ResourceExhausted]: 429,
  [ErrorCode.Internal]: 500,
  [ErrorCode.Unavailable]: 503,
  [ErrorCode.Fenced]: 503,
};

/** gRPC status codes (the numbers of the gRPC spec, as grpc-js's `status` has them). */
export const GrpcCode = {
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/**
 * The one gRPC status for each domain error code. Conflict is ABORTED (a concurrent change:
 * retry the whole read-modify-write), Unplaceable and PreconditionFailed are
 * FAILED_PRECONDITION (do not retry until the state changes), Fenced is UNAVAILABLE (retry,
 * against the leader).
 */
export const GRPC_STATUS_OF: Readonly<Record<ErrorCode, (typeof GrpcCode)[keyof typeof GrpcCode]>> = {
  [ErrorCode.InvalidArgument]: GrpcCode.INVALID_ARGUMENT,
  [ErrorCode.Unauthenticated]: GrpcCode.UNAUTHENTICATED,
  [ErrorCode.PermissionDenied]: GrpcCode.PERMISSION_DENIED,
  [ErrorCode.NotFound]: GrpcCode.NOT_FOUND,
  [ErrorCode.Conflict]: GrpcCode.ABORTED,
  [ErrorCode.PreconditionFailed]: GrpcCode.FAILED_PRECONDITION,
  [ErrorCode.Unplaceable]: GrpcCode.FAILED_PRECONDITION,
  [ErrorCode.ResourceExhausted]: GrpcCode.RESOURCE_EXHAUSTED,
  [ErrorCode.Internal]: GrpcCode.INTERNAL,
  [ErrorCode.Unavailable]: GrpcCode.UNAVAILABLE,
  [ErrorCode.Fenced]: GrpcCode.UNAVAILABLE,
};
