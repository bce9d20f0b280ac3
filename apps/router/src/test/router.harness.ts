// Test-only helpers for the router's integration and end-to-end tests: the router as a real
// HTTP server on port 0 (in this process), programmable tiny upstream engines, a fake
// controller speaking the real RouterService gRPC contract, and sim-engine processes.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server as GrpcServer, status as GrpcStatus, type ServerWritableStream } from '@grpc/grpc-js';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { loadConfig } from '@llmgw/config';
import { createLogger, createMetricsRegistry } from '@llmgw/observability';
import {
  EngineKind,
  RouterServiceService,
  type EndpointSnapshot,
  type ReportUsageRequest,
  type WatchRequest,
  type WatchResponse,
} from '@llmgw/proto';
import { runTsEntry, spawnProcess, testGrpcTlsEnv, testServerCredentials, waitFor, type SpawnedProcess } from '@llmgw/testing';
import type { Registry } from 'prom-client';
import { stringify as toYaml } from 'yaml';
import { routerConfigSchema } from '../config/router.config';
import { RouterCore } from '../router.core';
import { RouterModule } from '../router.module';
import type { UsageSink } from '../usage/usage.sink';

/** A temporary folder for one test file's config files. */
export function tempDir(prefix = 'llmgw-router-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Writes a static router config (models + endpoints) as YAML and returns its path. */
export function writeRouterConfig(dir: string, doc: unknown, name = `router-${Math.random().toString(36).slice(2)}.yaml`): string {
  const file = join(dir, name);
  writeFileSync(file, toYaml(doc));
  return file;
}

/** The router running in this process, listening on 127.0.0.1 on a port the OS chose. */
export interface RouterUnderTest {
  readonly url: string;
  readonly app: INestApplication;
  readonly core: RouterCore;
  readonly metricsRegistry: Registry;
  close(): Promise<void>;
}

/**
 * Boots the real RouterModule (Nest + the proxy installed ahead of Express) on port 0 with
 * `env` as its environment (validated by the real schema). Logs are silent unless
 * LLMGW_LOG_LEVEL is given.
 */
export async function startRouter(env: Record<string, string>, extra: { usageSink?: UsageSink } = {}): Promise<RouterUnderTest> {
  const config = loadConfig(routerConfigSchema, {
    LLMGW_ROUTER_PORT: '0',
    LLMGW_LOG_LEVEL: 'silent',
    LLMGW_DATA_DIR: tmpdir(),
    LLMGW_ROUTER_ID: 'router-under-test',
    // Closing a test's router drains at once: nothing polls its /readyz.
    LLMGW_ROUTER_DRAIN_DELAY: '0ms',
    // gRPC to a controller over TLS, trusting the test CA.
    LLMGW_GRPC_TLS_CA: testGrpcTlsEnv().LLMGW_GRPC_TLS_CA,
    ...env,
  });
  const logger = createLogger({ name: 'llmgw-router', level: config.logLevel });
  const metricsRegistry = createMetricsRegistry({ processMetrics: false });
  const app = await NestFactory.create(RouterModule.forRoot({ config, logger, registry: metricsRegistry, usageSink: extra.usageSink }), new ExpressAdapter(), {
    logger: false,
    abortOnError: false,
  });
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`, app, core: app.get(RouterCore), metricsRegistry, close: () => app.close() };
}

/** What a fake upstream does with one inference request (body already read). */
export type UpstreamResponder = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

/** Answers like an engine: a small OpenAI-style JSON body, at once. */
export const answerOk: UpstreamResponder = (_req, res, body) => {
  const model = (JSON.parse(body.toString('utf8')) as { model?: string }).model ?? 'unknown';
  const text = JSON.stringify({ id: 'cmpl-fake', object: 'chat.completion', model, choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

/**
 * A tiny programmable engine on 127.0.0.1:0: counts inference requests, answers them with
 * `respond` (settable at any time), and serves `metricsText` on /metrics (404 when undefined).
 * `held` collects responses a holding responder keeps open; `releaseHeld()` answers them.
 */
export class FakeUpstream {
  hits = 0;
  readonly held: { res: ServerResponse; body: Buffer; req: IncomingMessage }[] = [];
  metricsText: string | undefined;
  respond: UpstreamResponder = answerOk;
  private server: HttpServer | undefined;
  port = 0;

  static async start(init: { metricsText?: string; respond?: UpstreamResponder } = {}): Promise<FakeUpstream> {
    const u = new FakeUpstream();
    u.metricsText = init.metricsText;
    if (init.respond) u.respond = init.respond;
    await u.listen(0);
    return u;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** A responder that keeps each request open until {@link releaseHeld}. */
  readonly hold: UpstreamResponder = (req, res, body) => {
    this.held.push({ req, res, body });
  };

  /** Answers every held request with `answerOk`. */
  releaseHeld(): void {
    for (const h of this.held.splice(0)) answerOk(h.req, h.res, h.body);
  }

  async listen(port: number): Promise<void> {
    const server = createServer((req, res) => {
      if (req.url === '/metrics') {
        req.resume();
        if (this.metricsText === undefined) {
          res.writeHead(404).end('not found');
        } else {
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(this.metricsText);
        }
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.hits++;
        this.respond(req, res, Buffer.concat(chunks));
      });
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** Stops listening and drops every connection (held requests are cut). */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    for (const h of this.held.splice(0)) h.res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** vLLM /metrics text with the given load (as the engine would report it). */
export function vllmMetrics(model: string, load: { running?: number; waiting?: number; kv?: number }): string {
  const lines = ['# TYPE vllm:num_requests_running gauge', `vllm:num_requests_running{model_name="${model}"} ${load.running ?? 0}`];
  lines.push('# TYPE vllm:num_requests_waiting gauge', `vllm:num_requests_waiting{model_name="${model}"} ${load.waiting ?? 0}`);
  if (load.kv !== undefined) lines.push('# TYPE vllm:kv_cache_usage_perc gauge', `vllm:kv_cache_usage_perc{model_name="${model}"} ${load.kv}`);
  return `${lines.join('\n')}\n`;
}

/** One endpoint as the controller publishes it. */
export interface FakeEndpoint {
  replicaId: string;
  model: string;
  url: string;
  engine?: 'vllm' | 'llamacpp';
}

/** A wire snapshot: `models` are catalog names (no aliases) unless given as objects. */
export function protoSnapshot(revision: number, endpoints: readonly FakeEndpoint[], models: readonly (string | { name: string; aliases: string[] })[]): EndpointSnapshot {
  return {
    revision,
    endpoints: endpoints.map((e) => ({
      replicaId: e.replicaId,
      model: e.model,
      url: e.url,
      engine: e.engine === 'llamacpp' ? EngineKind.ENGINE_KIND_LLAMACPP : EngineKind.ENGINE_KIND_VLLM,
      nodeId: 'node-1',
      suspect: false,
    })),
    catalog: {
      revision: 1,
      models: models.map((m) => (typeof m === 'string' ? { name: m, aliases: [] } : m)).map((m) => ({ ...m, engine: EngineKind.ENGINE_KIND_VLLM, metrics: undefined, endpoints: [] })),
    },
  };
}

/**
 * A controller as far as routers can tell: a real grpc-js server implementing RouterService.
 * `publish` sends a snapshot to every open watch (and to later ones); usage reports are kept.
 */
export class FakeController {
  readonly usageReports: ReportUsageRequest[] = [];
  readonly watchers = new Set<ServerWritableStream<WatchRequest, WatchResponse>>();
  watchCalls = 0;
  /** Set: answers every new watch with NotLeader (naming `leaderAddress` when given) and ends it, like a standby. */
  notLeader: { leaderAddress?: string } | undefined;
  private server: GrpcServer | undefined;
  private current: EndpointSnapshot | undefined;
  port = 0;

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Listens on `port` (0 = any) and returns the port. */
  async start(port = 0): Promise<number> {
    const server = new GrpcServer();
    server.addService(RouterServiceService, {
      watch: (call: ServerWritableStream<WatchRequest, WatchResponse>) => {
        this.watchCalls++;
        if (this.notLeader !== undefined) {
          call.write({ notLeader: this.notLeader });
          call.end();
          return;
        }
        this.watchers.add(call);
        const drop = (): void => void this.watchers.delete(call);
        call.on('cancelled', drop);
        call.on('close', drop);
        if (this.current !== undefined) call.write({ snapshot: this.current });
      },
      reportUsage: (call: { request: ReportUsageRequest }, callback: (e: { code: number; details: string } | null, r?: object) => void) => {
        if (call.request.routerId === '') return callback({ code: GrpcStatus.INVALID_ARGUMENT, details: 'router id required' });
        this.usageReports.push(call.request);
        callback(null, {});
      },
    });
    this.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${port}`, testServerCredentials(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    this.server = server;
    return this.port;
  }

  /** Makes `snapshot` current and writes it to every open watch stream. */
  publish(snapshot: EndpointSnapshot): void {
    this.current = snapshot;
    for (const w of this.watchers) w.write({ snapshot });
  }

  /** Writes a snapshot to open streams without making it current (to send an out-of-order one). */
  send(snapshot: EndpointSnapshot): void {
    for (const w of this.watchers) w.write({ snapshot });
  }

  /** Dies like a crashed process: every stream and connection dropped at once, state forgotten. */
  stop(): void {
    this.server?.forceShutdown();
    this.server = undefined;
    this.watchers.clear();
    this.current = undefined;
  }
}

/** A sim-engine process and its base URL. */
export interface SimEngine {
  readonly proc: SpawnedProcess;
  readonly url: string;
}

/** Starts `tools/sim-engine` on port 0 with `args` and waits until it is ready. */
export async function startSimEngine(args: readonly string[], name = 'sim-engine'): Promise<SimEngine> {
  const proc = await spawnProcess({
    ...runTsEntry('tools/sim-engine/src/main.ts', ['--port', '0', ...args]),
    name,
    readyWhen: { stdoutMatch: /sim-engine ready/ },
    deadlineMs: 60_000,
  });
  const m = /listening on (http:\/\/[0-9.]+:\d+)/.exec(proc.stdout);
  if (m === null) throw new Error(`${name}: no listening line${proc.describeOutput()}`);
  return { proc, url: m[1] };
}

/** POSTs a JSON body to the router and returns status, headers and parsed body. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: unknown; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** The value of one sample in Prometheus text, or undefined when the series is absent. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const got: Record<string, string> = {};
    for (const lm of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) got[lm[1]] = lm[2];
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  return undefined;
}

/**
 * A raw TCP client of an HTTP server on 127.0.0.1: sends bytes as given (malformed ones too) and
 * collects every byte it receives, as latin1 text. Waits are on conditions with a deadline.
 */
export class RawClient {
  received = '';
  ended = false;
  readonly socket: Socket;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.setEncoding('latin1');
    this.socket.on('data', (d: string) => (this.received += d));
    this.socket.on('close', () => (this.ended = true));
    this.socket.on('error', () => undefined);
  }

  /** A client of the router under test. */
  static to(r: { readonly url: string }): RawClient {
    return new RawClient(Number(new URL(r.url).port));
  }

  send(data: string | Buffer): void {
    if (typeof data === 'string') this.socket.write(data, 'latin1');
    else this.socket.write(data);
  }

  /** Resolves with everything received once `check` holds on it; throws past the deadline. */
  async until(check: (received: string) => boolean, ms = 5_000): Promise<string> {
    await waitFor(() => check(this.received), { deadlineMs: ms, intervalMs: 5, message: `bytes received (so far ${JSON.stringify(this.received.slice(0, 300))})` });
    return this.received;
  }

  /** The first response: status, head and the body framed by its Content-Length (parsed as JSON when it is). */
  async response(ms = 5_000): Promise<{ status: number; head: string; text: string; json: unknown }> {
    const complete = (t: string): boolean => {
      const end = t.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const m = /\r\ncontent-length: *(\d+)/i.exec(t.slice(0, end));
      return m !== null ? Buffer.byteLength(t, 'latin1') >= end + 4 + Number(m[1]) : this.ended;
    };
    const t = await this.until(complete, ms);
    const end = t.indexOf('\r\n\r\n');
    const head = t.slice(0, end);
    const m = /\r\ncontent-length: *(\d+)/i.exec(head);
    const text = Buffer.from(t.slice(end + 4, m !== null ? end + 4 + Number(m[1]) : undefined), 'latin1').toString('utf8');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1] ?? Number.NaN), head, text, json };
  }

  /** Resolves once the server has closed the connection; throws past the deadline. */
  async closed(ms = 5_000): Promise<void> {
    await waitFor(() => this.ended, { deadlineMs: ms, intervalMs: 5, message: 'connection closed by the server' });
  }

  close(): void {
    this.socket.destroy();
  }
}
