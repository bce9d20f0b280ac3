import { randomUUID } from 'node:crypto';
import type { Clock, ModelView } from '@llmgw/domain';
import type { Logger } from 'pino';
import { policyFor, prefixAffinityParams, requestPrefixKey } from '@llmgw/routing';
import { LEAST_LOAD, ROUND_ROBIN, Waiter, type Admission, type AdmissionService, type RouteHow } from '../admission/admission.service';
import type { EndpointLease } from '../admission/endpoint.lease';
import { sendError, type ErrorHeaders, type RouterErrorKind } from '../api/openai-error.mapper';
import { keyAllows, type ApiKeyAuthenticator, type RouterKey } from '../auth/api-key.authenticator';
import type { CatalogView } from '../endpoints/catalog.view';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { EndpointState } from '../endpoints/endpoint.state';
import { joinForWrite, type ApiRequest, type ApiResponse, type EngineCallTimeouts, type EnginePool } from '../http1';
import type { KeyAdmission, KeyLimitsStage, KeyRefusal } from '../tenancy/key-limits.stage';
import { askForStreamUsage, type TokenUsage } from '../tenancy/response-usage';
import { Exchange, type RouteName } from './exchange';
import type { ProxyOptions } from './proxy.options';
import { Relay, type RelayHost } from './relay';
import type { RequestObserver, UpstreamFailure } from './request.observer';
import { scanRequestBody } from './request-body.scanner';

export { ROUTE_HEADER, routeHeader, type ProxyOptions } from './proxy.options';

const ROUTES: ReadonlyMap<string, { readonly name: RouteName; readonly method: 'GET' | 'POST' }> = new Map([
  ['/v1/chat/completions', { name: 'chat', method: 'POST' }],
  ['/v1/completions', { name: 'completions', method: 'POST' }],
  ['/v1/embeddings', { name: 'embeddings', method: 'POST' }],
  ['/v1/models', { name: 'models', method: 'GET' }],
] as const);

/** The path of each route, for messages. */
const ROUTE_PATHS: Readonly<Record<RouteName, string>> = { chat: '/v1/chat/completions', completions: '/v1/completions', embeddings: '/v1/embeddings', models: '/v1/models' };

/** A path segment decoded; malformed escapes stay as written (they then name no model). */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** Request headers never forwarded to an engine: hop-by-hop, and what the router sets itself. */
const DROP_REQUEST = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect', 'host', 'content-length', 'proxy-authorization']);

/**
 * The OpenAI API on the hot path, as one `(req, res)` handler for either HTTP/1.1 reader
 * (http1/). A request goes through four stages:
 * 1. **route** — authenticate, match the path, find `model` in the body (read once, bounded,
 *    checked as JSON without building the document) and resolve it in the catalog;
 * 2. **admit and choose** — the key's limits, then admission (libs/routing's picker, run once),
 *    which answers with an EndpointLease, a place in the model's queue, or a refusal;
 * 3. **relay** — the **original bytes** go to the leased engine over a pooled keep-alive
 *    connection and its answer comes back untouched (see Relay: retries, stream cuts);
 * 4. **settle** — the lease is released with the outcome (waking the queue), the key's claim is
 *    settled with the tokens used, and the request observer is told.
 * Every refusal is OpenAI-shaped (see openai-error.mapper).
 */
export class ProxyHandler implements RelayHost {
  private readonly debug: boolean;
  private readonly modelLists = new WeakMap<CatalogView, Buffer>();
  private readonly defaultTimeouts: EngineCallTimeouts;
  private readonly modelTimeouts = new WeakMap<ModelView, EngineCallTimeouts>();

  constructor(
    private readonly registry: EndpointRegistry,
    private readonly admission: AdmissionService,
    private readonly auth: ApiKeyAuthenticator,
    private readonly keyLimits: KeyLimitsStage | undefined,
    /** Told the tokens each answer of a keyed request used, for usage per key. */
    private readonly keyUsage: ((key: string, model: string, usage: TokenUsage) => void) | undefined,
    readonly observer: RequestObserver,
    private readonly pool: EnginePool,
    private readonly clock: Clock,
    readonly logger: Logger,
    readonly options: ProxyOptions,
  ) {
    this.debug = logger.isLevelEnabled('debug');
    this.defaultTimeouts = { firstByteMs: options.firstByteTimeoutMs, idleMs: options.idleTimeoutMs };
  }

  /** False when API keys are on and `authorization` (the header's value) carries no valid one: such a request is refused with 401 unread. */
  authorizes(authorization: string | undefined): boolean {
    return !this.auth.enforcing || this.auth.check(authorization).ok;
  }

  /** Answers one request under `/v1`. Never throws; every path ends the response. */
  readonly handle = (req: ApiRequest, res: ApiResponse): void => {
    try {
      this.route(req, res);
    } catch (error) {
      this.internalError(req, res, error);
    }
  };

  // ── 1. Route ────────────────────────────────────────────────────────────────────────────────

  private route(req: ApiRequest, res: ApiResponse): void {
    const start = performance.now();
    // Authentication comes before anything else, even routing (and neither reader reads a body it would refuse).
    const check = this.auth.enforcing ? this.auth.check(req.headers.authorization) : undefined;
    if (check !== undefined && !check.ok) {
      this.observer.authFailed();
      const message = check.reason === 'expired' ? 'The API key has expired.' : 'Missing or invalid API key: send "Authorization: Bearer <key>".';
      const status = sendError(res, 'unauthorized', message, null, {
        'www-authenticate': 'Bearer',
      });
      this.count('', '', status, start);
      return;
    }
    const url = req.url;
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const route = ROUTES.get(path);
    if (route === undefined) {
      if (path.startsWith('/v1/models/') && req.method === 'GET') return this.retrieveModel(res, safeDecode(path.slice(11)), start, check?.ok ? check.key : undefined);
      this.count('', '', sendError(res, 'unknown_route', `Unknown request URL: ${req.method} ${path}.`), start);
      return;
    }
    if (req.method !== route.method) {
      const status = sendError(res, 'method_not_allowed', `Method ${req.method} is not allowed on ${path}; use ${route.method}.`, null, { allow: route.method });
      this.count(route.name, '', status, start);
      return;
    }
    if (route.name === 'models') return this.listModels(res, start, check?.ok ? check.key : undefined);
    const ex = new Exchange(req, res, route.name, start);
    if (check?.ok) ex.key = check.key;
    res.on('close', () => this.onClientClose(ex));
    if (req.bodyTooLarge) {
      this.fail(ex, 'body_too_large', `Request body is larger than the limit of ${this.options.maxBodyBytes} bytes.`, null, { connection: 'close' });
      return;
    }
    this.step(ex, () => this.onRequestBody(ex, req.body));
  }

  /** The body's `model`, resolved in the catalog and checked against the key and the route; then on to admission. */
  private onRequestBody(ex: Exchange, body: Buffer): void {
    const scan = scanRequestBody(body, this.options.maxJsonDepth);
    if (!scan.ok) {
      if (scan.problem === 'invalid_json') this.fail(ex, 'invalid_json', `Request body is not valid JSON: ${scan.message}`);
      else this.fail(ex, scan.problem === 'too_deep' ? 'json_too_deep' : 'invalid_request', scan.message);
      return;
    }
    const requested = scan.model;
    if (requested === undefined || requested === '') {
      this.fail(ex, 'invalid_request', 'you must provide a model parameter', 'model');
      return;
    }
    const model = this.registry.catalog.resolve(requested);
    // A model the key may not use reads exactly as one that does not exist: no other tenant's models are named.
    if (model === undefined || (ex.key !== undefined && !keyAllows(ex.key, requested, model.name))) {
      this.fail(ex, 'model_not_found', `The model \`${requested.slice(0, 256)}\` does not exist.`, 'model');
      return;
    }
    ex.model = model.name;
    // A model that does not serve this endpoint is refused here: the engine never sees it.
    if (model.endpoints !== undefined && !(model.endpoints as readonly string[]).includes(ex.route)) {
      this.fail(
        ex,
        'endpoint_not_served',
        `The model \`${model.name}\` does not serve ${ROUTE_PATHS[ex.route]} (it serves ${model.endpoints.map((e) => ROUTE_PATHS[e]).join(', ') || 'none of the API endpoints'}).`,
        'model',
      );
      return;
    }
    ex.timeouts = this.timeoutsOf(model);
    ex.body = body;
    if (ex.key !== undefined) {
      // The key's tokens are counted from the engine's usage: a stream asks for its usage chunk,
      // which is taken out again on the way back if the client did not ask for it.
      const asked = askForStreamUsage(body);
      ex.body = asked.body;
      ex.stripUsage = asked.strip;
    }
    this.admit(ex, model, body);
  }

  /** A model's deadlines: its own where the catalog sets them, else the router's; one object per catalog model. */
  private timeoutsOf(model: ModelView): EngineCallTimeouts {
    if (model.firstByteTimeoutMs === undefined && model.stallTimeoutMs === undefined) return this.defaultTimeouts;
    let t = this.modelTimeouts.get(model);
    if (t === undefined) {
      t = { firstByteMs: model.firstByteTimeoutMs ?? this.defaultTimeouts.firstByteMs, idleMs: model.stallTimeoutMs ?? this.defaultTimeouts.idleMs };
      this.modelTimeouts.set(model, t);
    }
    return t;
  }

  // ── 2. Admit and choose ─────────────────────────────────────────────────────────────────────

  /** The key's limits first (when it has any), then an endpoint. */
  private admit(ex: Exchange, model: ModelView, body: Buffer): void {
    const key = ex.key;
    if (this.keyLimits !== undefined && this.keyLimits.needs(key)) {
      const decided = this.keyLimits.admit(key, body);
      if (!(decided instanceof Promise)) {
        this.onKeyLimits(ex, model, body, decided);
        return;
      }
      void decided.then(
        (result) => this.step(ex, () => this.onKeyLimits(ex, model, body, result)),
        (error: unknown) => this.step(ex, () => this.stepFailed(ex, error)),
      );
      return;
    }
    this.admitToEndpoint(ex, model, body);
  }

  /** The key's limits answered: refused (429 in OpenAI's shape), or on to choosing an endpoint. */
  private onKeyLimits(ex: Exchange, model: ModelView, body: Buffer, result: KeyAdmission | KeyRefusal): void {
    if ('kind' in result) {
      this.observer.keyLimitRefused(result.kind);
      this.fail(ex, result.kind, result.message, null, result.headers);
      return;
    }
    ex.limits = result;
    if (ex.clientGone) {
      this.settleLimits(ex, 499);
      return;
    }
    this.admitToEndpoint(ex, model, body);
  }

  /** Admission for the model's endpoints, chosen as the model's policy says: a lease now, a place in the queue, or a refusal. */
  private admitToEndpoint(ex: Exchange, model: ModelView, body: Buffer): void {
    const admission = this.admission.admit(model.name, this.routeHow(model, ex.route, body));
    if (admission instanceof Waiter) {
      ex.waiter = admission;
      void admission.promise.then((a) => this.step(ex, () => this.onAdmission(ex, a)));
      return;
    }
    this.onAdmission(ex, admission);
  }

  /**
   * How admission should choose for this request: the model's policy for the route, and for
   * prefix affinity the prompt's prefix key. The body is parsed only then (the scanner has
   * already checked it is JSON within the depth limit) and only its leading blocks are rendered
   * and hashed (libs/routing requestPrefixKey).
   */
  private routeHow(model: ModelView, route: RouteName, body: Buffer): RouteHow {
    if (route === 'models') return LEAST_LOAD;
    const policy = policyFor(model.routing, route);
    if (policy !== 'prefix-affinity' || route === 'embeddings') return policy === 'round-robin' ? ROUND_ROBIN : LEAST_LOAD;
    const params = prefixAffinityParams(model.routing);
    const key = requestPrefixKey(JSON.parse(body.toString('utf8')) as unknown, route, params);
    return key === undefined ? { policy } : { policy, key, epsilon: params.epsilon };
  }

  private onAdmission(ex: Exchange, admission: Admission): void {
    ex.waiter = undefined;
    if (!admission.ok) {
      const r = admission.refusal;
      this.fail(ex, r.kind, r.message, null, { 'retry-after': r.retryAfterSeconds });
      return;
    }
    const lease = admission.lease;
    ex.reason = lease.reason;
    if (ex.clientGone) {
      lease.release('abandoned');
      return;
    }
    ex.queuedMs = lease.queuedMs;
    ex.first = lease.state;
    this.send(ex, lease);
    this.observer.overhead((performance.now() - ex.start - lease.queuedMs) / 1000);
  }

  /** Leases another endpoint after `failed` failed: one this request has not tried (retries never queue). */
  nextLease(ex: Exchange, failed: EndpointState): EndpointLease | undefined {
    if (ex.tried === undefined) {
      ex.tried = new Set();
      if (ex.first !== undefined) ex.tried.add(ex.first);
    }
    ex.tried.add(failed);
    return this.admission.retry(ex.model, ex.tried);
  }

  // ── 3. Relay ────────────────────────────────────────────────────────────────────────────────

  /** Forwards the original bytes to the leased endpoint; a Relay takes the answer. */
  send(ex: Exchange, lease: EndpointLease): void {
    ex.attempts++;
    const state = lease.state;
    this.observer.endpointChosen(ex.model, state.id);
    const t = state.target;
    ex.headerBlock ??= this.headerBlock(ex);
    const head = `POST ${t.basePath}${ex.req.url} HTTP/1.1\r\nhost: ${t.host}\r\n${ex.headerBlock}`;
    const relay = new Relay(this, ex, lease);
    ex.current = relay;
    relay.call = this.pool.request(t, joinForWrite(head, ex.body), relay, ex.timeouts ?? this.defaultTimeouts);
  }

  /** The client's header lines as received (the parser has validated them), minus hop-by-hop ones and the router's key. */
  private headerBlock(ex: Exchange): string {
    const raw = ex.req.rawHeaders;
    let block = '';
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (DROP_REQUEST.has(name)) continue;
      // The router's API key is the router's: never hand it to an engine.
      if (name === 'authorization' && this.auth.enforcing) continue;
      block += `${raw[i]}: ${raw[i + 1]}\r\n`;
    }
    return `${block}content-length: ${ex.body.length}\r\n\r\n`;
  }

  retry(ex: Exchange, lease: EndpointLease, reason: UpstreamFailure, detail: string): void {
    this.observer.retried(ex.model, reason);
    if (this.debug) this.logger.debug({ requestId: this.requestId(ex), model: ex.model, replicaId: lease.state.id, reason, detail }, 'retrying on another endpoint');
    ex.tried?.add(lease.state);
    this.send(ex, lease);
  }

  // ── 4. Settle ───────────────────────────────────────────────────────────────────────────────

  /** Runs a step of the exchange; a bug in it answers 500 (or closes a started response) instead of killing the process. */
  private step(ex: Exchange, run: () => void): void {
    try {
      run();
    } catch (error) {
      this.stepFailed(ex, error);
    }
  }

  /** A step threw: release what the exchange holds, answer 500 (or close a started response), log an error id. */
  stepFailed(ex: Exchange, error: unknown): void {
    ex.current?.abandon();
    this.internalError(ex.req, ex.res, error);
    this.finish(ex, 500);
  }

  private internalError(req: ApiRequest, res: ApiResponse, error: unknown): void {
    const errorId = randomUUID();
    this.logger.error({ errorId, err: error instanceof Error ? error.stack : String(error), url: req.url }, 'internal error while proxying');
    if (res.headersSent) res.destroy();
    else sendError(res, 'internal', `Internal error in the router (error id ${errorId}).`);
  }

  private onClientClose(ex: Exchange): void {
    if (ex.res.writableFinished || ex.clientGone) return;
    ex.clientGone = true;
    ex.waiter?.cancel();
    ex.current?.abandon();
    // 499: nginx's "client closed request".
    this.finish(ex, 499);
  }

  fail(ex: Exchange, kind: RouterErrorKind, message: string, param: string | null = null, headers?: ErrorHeaders): void {
    if (ex.clientGone || ex.finished) return;
    const status = sendError(ex.res, kind, message, param, headers);
    this.finish(ex, status);
  }

  finish(ex: Exchange, status: number): void {
    if (ex.finished) return;
    ex.finished = true;
    if (this.options.keyMetrics === true && ex.key !== undefined) this.observer.keyAnswered(ex.key.name, ex.model, status);
    this.settleLimits(ex, status);
    this.count(ex.route, ex.model, status, ex.start);
    if (ex.bytes > 0) this.observer.responseBytes(ex.model, ex.bytes);
    if (this.debug) {
      this.logger.debug(
        { requestId: this.requestId(ex), model: ex.model, replicaId: ex.current?.lease.state.id, status, attempts: ex.attempts, queuedMs: ex.queuedMs, bytes: ex.bytes },
        'request finished',
      );
    }
  }

  /** Settles the request's claim on its key's limits with the tokens its answer used, and counts them. */
  private settleLimits(ex: Exchange, status: number): void {
    const usage = ex.usageTap?.usage ?? ex.usageTail?.usage();
    if (usage !== undefined) {
      this.observer.tokensUsed(ex.model, usage, this.options.keyMetrics === true ? ex.key?.name : undefined);
      if (ex.key !== undefined) this.keyUsage?.(ex.key.name, ex.model, usage);
    }
    const admission = ex.limits;
    if (admission === undefined || this.keyLimits === undefined) return;
    ex.limits = undefined;
    // Settling is mostly synchronous now: a throw must not escape into whatever ended the response.
    try {
      this.keyLimits.settle(admission, usage, status >= 200 && status < 300)?.catch(this.settleFailed);
    } catch (error) {
      this.settleFailed(error);
    }
  }

  /** A settle that failed (at once or later): logged; the claim lapses with its window and lease. */
  private readonly settleFailed = (error: unknown): void => {
    this.logger.debug({ err: error }, 'key limits: settle failed; the claim lapses with its window');
  };

  private count(route: string, model: string, status: number, start: number): void {
    this.observer.answered(route, model, status, (performance.now() - start) / 1000);
  }

  requestId(ex: Exchange): string {
    const given = ex.req.headers['x-request-id'];
    if (typeof given === 'string' && given !== '') return given;
    const id = randomUUID();
    ex.req.headers['x-request-id'] = id;
    return id;
  }

  // ── /v1/models ──────────────────────────────────────────────────────────────────────────────

  /** Lists the models the request's key may use (every model without a key list). */
  private listModels(res: ApiResponse, start: number, key: RouterKey | undefined): void {
    const catalog = this.registry.catalog;
    const everything = key?.models === undefined || key.models.includes('*');
    let body = everything ? this.modelLists.get(catalog) : undefined;
    if (body === undefined) {
      const created = Math.floor(this.clock.now() / 1000);
      const data = catalog.listed.filter((m) => key === undefined || keyAllows(key, m.id, m.model)).map((m) => ({ id: m.id, object: 'model', created, owned_by: 'llmgw', root: m.model }));
      body = Buffer.from(JSON.stringify({ object: 'list', data }));
      if (everything) this.modelLists.set(catalog, body);
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
    this.count('models', '', 200, start);
  }

  private retrieveModel(res: ApiResponse, id: string, start: number, key: RouterKey | undefined): void {
    const m = this.registry.catalog.resolve(id);
    if (m === undefined || (key !== undefined && !keyAllows(key, id, m.name))) {
      this.count('models', '', sendError(res, 'model_not_found', `The model \`${id.slice(0, 256)}\` does not exist.`, 'model'), start);
      return;
    }
    const body = JSON.stringify({ id, object: 'model', created: Math.floor(this.clock.now() / 1000), owned_by: 'llmgw', root: m.name });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    this.count('models', m.name, 200, start);
  }
}
