// Test support: an in-process controller (the real Nest module on real ports), a watching
// router over real gRPC, and a catalog document builder.
import { Metadata, type ClientReadableStream } from '@grpc/grpc-js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inflateRawSync } from 'node:zlib';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import type { INestApplication } from '@nestjs/common';
import { loadConfig } from '@llmgw/config';
import { createLogger, createMetricsRegistry } from '@llmgw/observability';
import { inheritedTestEnv, runTsEntry, spawnProcess, testChannelCredentials, testGrpcTlsEnv, type SpawnedProcess } from '@llmgw/testing';
import { EndpointSnapshot, RouterServiceClient, type WatchResponse } from '@llmgw/proto';
import type { AddressInfo } from 'node:net';
import { controllerConfigSchema } from '../config/controller.config';
import type { Store } from '@llmgw/store';
import { CONTROLLER_STORE, ControllerModule, serveControllerGrpc } from '../controller.module';
import { AGENT_STREAM_HANDLER, type AgentStreamHandler } from '../grpc/agent.service';
import { AgentSessions } from '../grpc/agent.sessions';
import { LeadershipService } from '../leadership/leadership.service';
import { TermService, type Phase } from '../leadership/term.service';
import { NodeRegistry } from '../nodes/node.registry';
import { EndpointPublisher } from '../publishing/endpoint.publisher';
import { Reconciler } from '../reconcile/replica.reconciler';
import { ReplicaRegistry } from '../replicas/replica.registry';

/** Fast timings for tests: 200 ms heartbeats, unreachable after 1 s, lost after 2.5 s. */
export const FAST_ENV: Record<string, string> = {
  LLMGW_CONTROLLER_HEARTBEAT_INTERVAL: '200ms',
  LLMGW_CONTROLLER_UNREACHABLE_AFTER: '1s',
  LLMGW_CONTROLLER_LOST_AFTER: '2500ms',
  LLMGW_CONTROLLER_SETTLE: '3s',
  LLMGW_CONTROLLER_SETTLE_HOLDERS: '2s',
  LLMGW_CONTROLLER_TICK: '200ms',
  LLMGW_CONTROLLER_BACKOFF_MIN: '500ms',
  LLMGW_CONTROLLER_BACKOFF_MAX: '5s',
  LLMGW_CONTROLLER_COMMAND_TIMEOUT: '5s',
};

/** The tokens of a controller started with {@link WITH_TOKENS}, for its agents and routers. */
export const TEST_JOIN_TOKEN = 'test-join-token-0123456789abcdef';
export const TEST_ROUTER_TOKEN = 'test-router-token-0123456789abcdef';
/** Controller settings that require the test tokens on every gRPC call, as deployed. */
export const WITH_TOKENS: Record<string, string> = {
  LLMGW_CONTROLLER_JOIN_TOKEN: TEST_JOIN_TOKEN,
  LLMGW_CONTROLLER_ROUTER_TOKEN: TEST_ROUTER_TOKEN,
  LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'false',
};

/** What tests look at inside a running controller: its parts, each as the app built it. */
export interface ControllerView {
  readonly nodes: NodeRegistry;
  readonly replicas: ReplicaRegistry;
  readonly sessions: AgentSessions;
  readonly publisher: EndpointPublisher;
  readonly reconciler: Reconciler;
  readonly leadership: LeadershipService;
  readonly controllerId: string;
  readonly phase: Phase;
  whenLoaded(): Promise<void>;
  /** The agent stream handler's identity check (the one a Register goes through). */
  authenticate: AgentStreamHandler['authenticate'];
  /** The agent stream handler's admission; assigning it replaces the one Connect calls. */
  admit: AgentStreamHandler['admit'];
  /** The store the controller runs on (its methods can be wrapped to slow a call down). */
  readonly options: { readonly store: Store };
}

/** The parts of `app` as a {@link ControllerView}. */
export function controllerView(app: INestApplication): ControllerView {
  const term = app.get(TermService);
  const handler = app.get<AgentStreamHandler>(AGENT_STREAM_HANDLER);
  const leadership = app.get(LeadershipService);
  return {
    nodes: app.get(NodeRegistry),
    replicas: app.get(ReplicaRegistry),
    sessions: app.get(AgentSessions),
    publisher: app.get(EndpointPublisher),
    reconciler: app.get(Reconciler),
    leadership,
    get controllerId() {
      return leadership.ownerId;
    },
    get phase() {
      return term.phase;
    },
    whenLoaded: () => term.whenLoaded(),
    authenticate: (nodeId, secret) => handler.authenticate(nodeId, secret),
    get admit() {
      return handler.admit.bind(handler);
    },
    set admit(admit) {
      handler.admit = admit;
    },
    options: { store: app.get<{ store: Store }>(CONTROLLER_STORE).store },
  };
}

/** A controller running in this process. */
export interface TestController {
  readonly app: INestApplication;
  readonly plane: ControllerView;
  /** `127.0.0.1:<grpc port>` */
  readonly grpc: string;
  /** `http://127.0.0.1:<http port>` */
  readonly http: string;
  /** Log lines (JSON objects) written so far. */
  readonly logs: Record<string, unknown>[];
  close(): Promise<void>;
}

/**
 * Starts the real controller module on 127.0.0.1 (HTTP on port 0; gRPC on LLMGW_CONTROLLER_GRPC_PORT or 0,
 * over TLS with the test PKI unless `env` says LLMGW_GRPC_INSECURE=true).
 * Without tokens in `env` it runs with LLMGW_CONTROLLER_INSECURE_NO_AUTH=true, said explicitly
 * here: tests about control logic need no credentials; tests about them pass tokens.
 */
export async function startController(env: Record<string, string>): Promise<TestController> {
  const config = loadConfig(controllerConfigSchema, { LLMGW_CONTROLLER_GRPC_PORT: '0', LLMGW_LOG_LEVEL: 'info', LLMGW_CONTROLLER_INSECURE_NO_AUTH: 'true', ...testGrpcTlsEnv(), ...FAST_ENV, ...env });
  const logs: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = createLogger({ name: 'llmgw-controller', level: config.logLevel, destination });
  const registry = createMetricsRegistry();
  const app = await NestFactory.create(ControllerModule.forRoot({ config, logger, registry }), new ExpressAdapter(), { logger: false, abortOnError: false });
  const grpc = await serveControllerGrpc(app, config, logger);
  // Port 0 unless the test names one (a standby forwards to the leader's advertised admin port).
  await app.listen(env.LLMGW_CONTROLLER_PORT !== undefined ? config.port : 0, '127.0.0.1');
  const plane = controllerView(app);
  const port = (app.getHttpServer().address() as AddressInfo).port;
  let closed = false;
  return {
    app,
    plane,
    grpc: `127.0.0.1:${grpc.port}`,
    http: `http://127.0.0.1:${port}`,
    logs,
    async close() {
      if (closed) return;
      closed = true;
      await app.close();
    },
  };
}

/**
 * A router's view of `RouterService.Watch`: every snapshot received, reconnecting when the stream
 * ends. With `compressed` it asks for compressed snapshots and inflates them; `forms` says which
 * form each message came in.
 */
export class WatchingRouter {
  readonly snapshots: EndpointSnapshot[] = [];
  readonly forms: ('snapshot' | 'compressed')[] = [];
  private client: RouterServiceClient;
  private call: ClientReadableStream<WatchResponse> | undefined;
  private stopped = false;
  /** Streams opened so far. */
  streams = 0;
  /** How the last stream ended (e.g. UNAUTHENTICATED), if one has. */
  lastStatus: { code: number; details: string } | undefined;

  constructor(
    private address: string,
    readonly routerId = 'test-router',
    readonly compressed = false,
    /** Sent as `authorization: Bearer <token>` when given. */
    readonly token?: string,
  ) {
    this.client = new RouterServiceClient(address, testChannelCredentials());
    this.open();
  }

  /** The newest snapshot, if any. */
  get latest(): EndpointSnapshot | undefined {
    return this.snapshots[this.snapshots.length - 1];
  }

  /** Endpoint URLs of the newest snapshot, sorted. */
  urls(): string[] {
    return (this.latest?.endpoints ?? []).map((e) => e.url).sort();
  }

  close(): void {
    this.stopped = true;
    this.call?.cancel();
    this.client.close();
  }

  private open(): void {
    if (this.stopped) return;
    this.streams += 1;
    const metadata = new Metadata();
    if (this.token !== undefined) metadata.set('authorization', `Bearer ${this.token}`);
    const call = this.client.watch({ routerId: this.routerId, acceptCompressed: this.compressed }, metadata);
    this.call = call;
    call.on('data', (r: WatchResponse) => {
      if (r.snapshot) {
        this.forms.push('snapshot');
        this.snapshots.push(r.snapshot);
      } else if (r.compressed) {
        this.forms.push('compressed');
        this.snapshots.push(EndpointSnapshot.decode(inflateRawSync(r.compressed.deflate)));
      }
    });
    call.on('error', () => undefined);
    call.on('status', (s: { code: number; details: string }) => {
      this.lastStatus = { code: s.code, details: s.details };
      if (this.call === call && !this.stopped) setTimeout(() => this.open(), 100);
    });
  }
}

/** A catalog document with vLLM models on one H100 each. */
export function catalogDoc(models: { name: string; replicas: number }[]): { models: unknown[] } {
  return {
    models: models.map((m) => ({
      name: m.name,
      source: `hf://org/${m.name}@main`,
      size: '1GB',
      replicas: m.replicas,
      profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB' }],
    })),
  };
}

/** Writes `doc` as a JSON catalog file in a temp dir; `cleanup()` removes it. */
export function catalogFile(doc: unknown): { path: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'llmgw-catalog-'));
  const path = join(dir, 'catalog.json');
  writeFileSync(path, JSON.stringify(doc));
  return { path, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Routers started by {@link startRouterProcesses}: the processes and the base URL each listens on. */
export interface RouterProcesses {
  readonly processes: SpawnedProcess[];
  readonly bases: string[];
}

/**
 * Starts `count` real router processes (`apps/router/src/main.ts`) on free ports, with none of
 * this process's LLMGW_* variables but the test PKI's TLS ones (inheritedTestEnv), each with
 * `env(i)`, and resolves once every one listens.
 */
export async function startRouterProcesses(count: number, env: (i: number) => Record<string, string>): Promise<RouterProcesses> {
  const base = inheritedTestEnv();
  const processes = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      spawnProcess({
        ...runTsEntry('apps/router/src/main.ts'),
        name: `llmgw-router-${i}`,
        cleanEnv: true,
        env: { ...base, LLMGW_ROUTER_PORT: '0', ...env(i) },
        readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
        deadlineMs: 60_000,
      }),
    ),
  );
  return { processes, bases: processes.map((r) => r.readyMatch?.[1] as string) };
}
