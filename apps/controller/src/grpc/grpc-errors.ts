import { status } from '@grpc/grpc-js';
import { Catch, type ArgumentsHost, type RpcExceptionFilter } from '@nestjs/common';
import { DomainError, ErrorCode, GRPC_STATUS_OF } from '@llmgw/domain';
import type { Logger } from 'pino';
import { of, throwError, type Observable } from 'rxjs';
import { WireError } from './proto.mapper';

/** A gRPC status as grpc-js sends it. */
export interface GrpcStatus {
  readonly code: status;
  readonly details: string;
}

/**
 * The one mapping from an error to the status a gRPC caller gets: a DomainError by its code
 * through GRPC_STATUS_OF, a message that cannot be used (WireError) as INVALID_ARGUMENT naming
 * the field, anything else INTERNAL with a fixed text (what went wrong is logged, not sent).
 */
export function grpcStatusOf(error: unknown): GrpcStatus {
  if (error instanceof DomainError) return { code: GRPC_STATUS_OF[error.code], details: error.message };
  if (error instanceof WireError) return { code: GRPC_STATUS_OF[ErrorCode.InvalidArgument], details: error.message };
  return { code: GRPC_STATUS_OF[ErrorCode.Internal], details: 'the controller could not handle the call' };
}

/** A grpc-js server call, as the handlers of a pass-through stream (`@GrpcStreamCall`) get it first. */
interface RawCall {
  getPeer(): string;
  emit(event: 'error', error: GrpcStatus): boolean;
}

const isRawCall = (value: unknown): value is RawCall => typeof (value as RawCall | undefined)?.getPeer === 'function';

/**
 * The gRPC microservice's exception filter: whatever a handler (or anything Nest runs before it)
 * throws is answered with {@link grpcStatusOf}'s status. A unary or server-streaming call gets it
 * through Nest's observable; a pass-through stream (AgentService.Connect) has the status emitted on
 * its call here, because Nest would otherwise leave the rejection unhandled.
 */
@Catch()
export class GrpcExceptionFilter implements RpcExceptionFilter<unknown> {
  constructor(private readonly logger: Logger) {}

  catch(exception: unknown, host: ArgumentsHost): Observable<unknown> {
    const answer = grpcStatusOf(exception);
    if (answer.code === status.INTERNAL) this.logger.error({ err: exception, context: 'GrpcExceptionFilter' }, 'gRPC call failed');
    const first: unknown = host.getArgByIndex(0);
    if (isRawCall(first)) {
      first.emit('error', answer);
      return of(undefined);
    }
    return throwError(() => answer);
  }
}
