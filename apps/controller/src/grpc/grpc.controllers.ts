import type { ServerDuplexStream, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';
import { Controller, Inject } from '@nestjs/common';
import { GrpcMethod, GrpcStreamCall } from '@nestjs/microservices';
import type { ConnectRequest, ConnectResponse, ReportUsageRequest, ReportUsageResponse, WatchRequest, WatchResponse } from '@llmgw/proto';
import type { Metadata } from '@grpc/grpc-js';
import type { AgentConnect } from './agent.service';
import type { RouterCalls } from './router.calls';
import { from, ignoreElements, type Observable } from 'rxjs';

/** Injection tokens of the handlers the gRPC controllers hand calls to. */
export const AGENT_CONNECT = Symbol('llmgw.controller.agent-connect');
export const ROUTER_CALLS = Symbol('llmgw.controller.router-calls');

// Method names are the keys of ts-proto's service definitions (`connect`, `watch`, `reportUsage`),
// which are what Nest's transport matches handlers against (grpc.transport.ts).

/** `llmgw.v1.AgentService` on Nest's gRPC transport: the agents' one stream, passed through as grpc-js gives it. */
@Controller()
export class AgentGrpcController {
  constructor(@Inject(AGENT_CONNECT) private readonly agents: AgentConnect) {}

  @GrpcStreamCall('AgentService', 'connect')
  connect(call: ServerDuplexStream<ConnectRequest, ConnectResponse>): void {
    this.agents.connect(call);
  }
}

/** `llmgw.v1.RouterService` on Nest's gRPC transport. */
@Controller()
export class RouterGrpcController {
  constructor(@Inject(ROUTER_CALLS) private readonly routers: RouterCalls) {}

  /**
   * Writes the pre-encoded snapshots to the call itself (the same bytes for every watcher, newest
   * only while a router is backed up); the observable Nest gets emits nothing and completes when
   * the stream has ended.
   */
  @GrpcMethod('RouterService', 'watch')
  watch(_request: WatchRequest, _metadata: Metadata, call: ServerWritableStream<WatchRequest, WatchResponse>): Observable<never> {
    return from(this.routers.watch(call)).pipe(ignoreElements());
  }

  @GrpcMethod('RouterService', 'reportUsage')
  reportUsage(request: ReportUsageRequest, _metadata: Metadata, call: ServerUnaryCall<ReportUsageRequest, ReportUsageResponse>): Promise<ReportUsageResponse> {
    return this.routers.reportUsage(request, call);
  }
}
