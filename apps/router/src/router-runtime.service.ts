import { systemClock } from '@llmgw/domain';
import { Inject, Injectable, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ReadinessService, ROOT_LOGGER, type Logger, type ReadinessGate } from '@llmgw/observability';
import { clientErrorAnswer, rawErrorResponse, sendError } from './api/openai-error.mapper';
import { ROUTER_CONFIG, type RouterConfig } from './config/router.config';
import { FastHttpFrontend, isApiPath, serveNodeRequest, type BodyLimits } from './http1';
import { RouterCore } from './router.core';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The operational endpoints Express serves (the observability module's); every other path is the proxy's to answer. */
const FRAMEWORK_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Node's clientError (a head or body its parser refuses, a request timeout on a connection it
 * serves) answered like Node does — status, then close — but with an OpenAI-shaped body.
 */
function answerClientError(error: Error & { code?: string; reason?: string }, socket: Socket): void {
  const started = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (error.code === 'ECONNRESET' || !socket.writable || started) {
    socket.destroy();
    return;
  }
  const { kind, message } = clientErrorAnswer(error);
  socket.end(rawErrorResponse(kind, message));
  socket.destroySoon();
}

/**
 * Puts the router core into the Nest app's lifecycle: at bootstrap it installs the proxy as
 * the HTTP server's request listener *ahead of* Express — `/v1/*` never enters Express's
 * router, middleware or body parsing; everything else (/healthz, /readyz, /metrics) goes on
 * to Express — and starts the core. Readiness stays false until the first routing table.
 * At shutdown it drains (see {@link beforeApplicationShutdown}) and releases sockets after the
 * listener has closed.
 */
@Injectable()
export class RouterRuntimeService implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly gate: ReadinessGate;
  private readonly logger: Logger;
  private frontend: FastHttpFrontend | undefined;

  constructor(
    private readonly core: RouterCore,
    @Inject(ROUTER_CONFIG) private readonly config: RouterConfig,
    private readonly adapterHost: HttpAdapterHost,
    readiness: ReadinessService,
    @Inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.logger = logger.child({ context: 'RouterRuntimeService' });
    this.gate = readiness.gate(
      'routing-table',
      core.mode === 'controller' ? 'no endpoint snapshot from the controller yet' : 'routing table not loaded yet',
    );
    // Stale but live: once it has a routing table the router serves from it while no controller
    // answers; this check stays ready and says how stale the table is.
    const watch = core.watch;
    if (watch !== undefined) {
      readiness.register('controller', () => {
        const { connected, controller, staleMs } = watch.state;
        return { ready: true, detail: { connected, controller, ...(staleMs !== undefined ? { staleSeconds: Math.round(staleMs / 100) / 10 } : {}) } };
      });
    }
    // With Redis, key limits stay enforced while it is unreachable (each router its share): this
    // check stays ready and says which.
    if (core.sharedLimits) {
      readiness.register('key-limits', () => ({ ready: true, detail: { mode: core.limiter.degraded ? 'per-router share (Redis unreachable)' : 'shared (Redis)' } }));
    }
  }

  onApplicationBootstrap(): void {
    const server = this.adapterHost.httpAdapter.getHttpServer() as Server;
    // Outlive the idle timeout of a load balancer in front (commonly 60 s), so it never reuses a
    // connection the router is closing at that moment (a spurious 502 at the balancer).
    server.keepAliveTimeout = 65_000;
    server.headersTimeout = 66_000;
    // Past the cap Node closes new connections as they arrive ('drop').
    server.maxConnections = this.config.http.maxConnections;
    server.on('drop', () => this.core.metrics.connectionsRefused.inc());
    // Every answer Node would give bodiless (400/408/431, 417, a missing Host) is written here in the OpenAI shape.
    server.on('clientError', answerClientError);
    server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
      sendError(res, 'expectation_failed', `Expect: ${String(req.headers.expect).slice(0, 64)} is not supported; only 100-continue is.`, null, { connection: 'close' });
    });
    // Node reads this server property per request (it is not in @types/node).
    (server as Server & { requireHostHeader: boolean }).requireHostHeader = false;
    const framework = server.listeners('request') as RequestListener[];
    server.removeAllListeners('request');
    const proxy = this.core.handle;
    // Both readers read a body once, bounded; with API keys on, a body behind a bad key is never
    // read: the proxy answers 401 from the head.
    const limits: BodyLimits = {
      maxBodyBytes: this.config.proxy.maxBodyBytes,
      readBody: (head) => this.core.proxy.authorizes(head.headers.authorization),
    };
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.httpVersionMajor === 1 && req.httpVersionMinor === 1 && req.headers.host === undefined) {
        // RFC 9112 §3.2 (Node's requireHostHeader, with a body).
        sendError(res, 'bad_http_request', 'An HTTP/1.1 request must carry a Host header.', null, { connection: 'close' });
        return;
      }
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const path = q < 0 ? url : url.slice(0, q);
      if (isApiPath(url) || !FRAMEWORK_PATHS.has(path)) {
        // The proxy answers unknown paths too (404 in the OpenAI shape, not Express's page).
        serveNodeRequest(req, res, limits, proxy);
      } else if (req.method !== 'GET' && req.method !== 'HEAD') {
        sendError(res, 'method_not_allowed', `Method ${req.method} is not allowed on ${path}; use GET.`, null, { allow: 'GET, HEAD' });
      } else {
        for (const listener of framework) listener.call(server, req, res);
      }
    });
    // In front of both: the router's own HTTP/1.1 reader takes new connections and serves plain
    // /v1 requests itself; a connection's first request it does not serve sends the connection
    // to the listener above for good.
    this.frontend = new FastHttpFrontend(server, proxy, {
      ...limits,
      keepAliveTimeoutMs: server.keepAliveTimeout,
      headersTimeoutMs: server.headersTimeout,
      requestTimeoutMs: server.requestTimeout > 0 ? server.requestTimeout : Number.POSITIVE_INFINITY,
      minBodyBytesPerSecond: this.config.http.minBodyBytesPerSecond,
      bodyRateGraceMs: this.config.http.bodyRateGraceMs,
      now: () => systemClock.now(),
      onHandover: () => this.core.metrics.httpHandovers.inc(),
    });
    this.core.start(() => {
      this.gate.open();
      this.logger.info({ revision: this.core.endpoints.revision }, 'ready: routing table received');
    });
  }

  /**
   * Graceful drain on SIGTERM, before Nest closes the listener:
   * 1. /readyz says not ready at once, while everything is still served for
   *    LLMGW_ROUTER_DRAIN_DELAY, so load balancers that poll it stop sending here first;
   * 2. the listener stops taking connections; idle keep-alive connections close, busy ones finish
   *    their request with `Connection: close`; the watch, scrapes and usage reports stop and
   *    queued requests are refused;
   * 3. requests in flight get LLMGW_ROUTER_DRAIN_TIMEOUT to finish; what is left is cut (a stream
   *    ends with an SSE error event), so the process exits 0 within its shutdown deadline.
   */
  async beforeApplicationShutdown(): Promise<void> {
    const { delayMs, timeoutMs } = this.config.drain;
    this.gate.close('shutting down: draining');
    this.logger.info({ delayMs, inFlight: this.core.inFlight() }, 'draining: not ready, still serving');
    await sleep(delayMs);
    const server = this.adapterHost.httpAdapter.getHttpServer() as Server;
    server.close();
    this.frontend?.drain();
    await this.core.drain();
    const deadline = Date.now() + timeoutMs;
    while (this.core.inFlight() > 0 && Date.now() < deadline) await sleep(Math.min(50, deadline - Date.now()));
    const left = this.core.inFlight();
    if (left > 0) this.logger.warn({ inFlight: left, timeoutMs, cut: this.core.cutInFlight() }, 'drain timeout: cutting the requests still in flight');
    else this.logger.info({}, 'drained: nothing in flight');
  }

  onApplicationShutdown(): void {
    this.frontend?.close();
    this.core.close();
  }
}
