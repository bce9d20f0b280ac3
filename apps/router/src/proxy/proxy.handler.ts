import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ApiEndpoint, Clock, ModelView } from '@llmgw/domain';
import type { Logger } from 'pino';
import { policyFor, prefixAffinityParams, requestPrefixKey } from '@llmgw/routing';
import { LEAST_LOAD, ROUND_ROBIN, Waiter, type Admission, type AdmissionService, type ChoiceReason, type RouteHow } from '../admission/admission.service';
import { ENGINE_ERROR_BODY_LIMIT, engineErrorBody, sendError, sseErrorEvent, type ErrorHeaders, type RouterErrorKind } from '../api/openai-error.mapper';
import { keyAllows, type ApiKeyAuthenticator, type RouterKey } from '../auth/api-key.authenticator';
import type { CatalogView } from '../endpoints/catalog.view';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';
import type { EndpointState } from '../endpoints/endpoint.state';
import type { RouterMetrics } from '../metrics/router.metrics';
import type { ApiRequest, ApiResponse } from './api-exchange';
import type { EngineCall, EngineCallTimeouts, EnginePool, EngineRequestError, EngineResponseHandler } from './engine-connection.pool';
import { FastRequest } from './fast-http.frontend';
import { joinForWrite } from './http1.syntax';
import type { ResponseHead } from './http1-response.parser';
import { scanRequestBody } from './request-body.scanner';
import { onlyPreamble } from './sse-preamble';
import { KeyLimitsStage, type KeyAdmission, type KeyRefusal } from '../tenancy/key-limits.stage';
import { askForStreamUsage, JsonUsageTail, SseUsageTap, type TokenUsage } from '../tenancy/response-usage';

/** Proxy settings; sizes in bytes, times in milliseconds. */
export interface ProxyOptions {
  /** Largest request body accepted; larger → 413. */
  readonly maxBodyBytes: number;
  /** Deepest nesting of objects and arrays accepted in a JSON body; deeper → 400. */
  readonly maxJsonDepth: number;
  /** Extra attempts on other endpoints after a failure before the first response byte. */
  readonly maxRetries: number;
  /** Longest a new TCP connection to an engine may take. */
  readonly connectTimeoutMs: number;
  /** Longest wait for an engine's response headers once the request is sent; a model's `firstByteTimeoutMs` overrides it. */
  readonly firstByteTimeoutMs: number;
  /** Longest silence from an engine in the middle of a response (the stall deadline); a model's `stallTimeoutMs` overrides it. */
  readonly idleTimeoutMs: number;
  /**
   * How long a 200 SSE response's head and role-only chunks are held back waiting for the first
   * content, so that an engine dying in between is retried like any failure before the first
   * byte; past it they are sent anyway. 0 = never hold.
   */
  readonly holdUntilContentMs: number;
  /** Adds `x-llmgw-route` to proxied responses: the chosen replica and why (see routeHeader). Off by default. */
  readonly debugHeader?: boolean;
  /** Counts requests and tokens per API key too (`llmgw_router_key_*`). Off by default: one series per key and model. */
  readonly keyMetrics?: boolean;
}

/** The debug header's name. */
export const ROUTE_HEADER = 'x-llmgw-route';

/**
 * The debug header's value: `replica=<id>; policy=<policy>` and, for prefix affinity, the
 * replica's rank in the prefix's rendezvous order (0 = home), the key's depth in blocks, the
 * load cap and the replicas the guard passed over; `fallback=` when a prefix-affinity request
 * was chosen by load; `retry=<n>` when it is a retry's replica.
 */
export function routeHeader(replicaId: string, reason: ChoiceReason, retries: number): string {
  let v = `replica=${replicaId}; policy=${reason.policy}`;
  if (reason.policy === 'prefix-affinity') {
    v += `; rank=${reason.rank}; blocks=${reason.blocks}; cap=${reason.cap}`;
    if (reason.deflectedFrom.length > 0) v += `; deflected=${reason.deflectedFrom.join(',')}`;
  } else if ('fallback' in reason) {
    v += `; fallback=${reason.fallback}`;
  }
  return retries > 0 ? `${v}; retry=${retries}` : v;
}

type RouteName = ApiEndpoint | 'models';

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
/** Response headers never passed back: hop-by-hop (Node frames the client connection itself). */
const DROP_RESPONSE = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);
/** Also dropped from an engine's error answer, whose body the router rewrites. */
const DROP_ERROR_RESPONSE = new Set([...DROP_RESPONSE, 'content-type', 'content-length', 'content-encoding']);

/** Largest preamble held back before the response is sent on anyway. */
const MAX_HELD_BYTES = 64 * 1024;

/** A response head and the preamble pieces held back until the first content (see ProxyOptions.holdUntilContentMs). */
interface HeldResponse {
  readonly status: number;
  readonly headers: string[];
  readonly pieces: Buffer[];
  bytes: number;
  timer: NodeJS.Timeout | undefined;
}

/** One attempt at one endpoint: receives the engine's response for the exchange. */
class Attempt implements EngineResponseHandler {
  call: EngineCall | undefined;
  settled = false;
  /** The response to the client has started (its head is written); from here a failure cuts it instead of retrying. */
  responded = false;
  /** Set while the head is held back waiting for the first content. */
  held: HeldResponse | undefined;

  constructor(
    private readonly proxy: ProxyHandler,
    readonly ex: Exchange,
    readonly state: EndpointState,
  ) {}

  // Each callback is guarded like ProxyHandler.step, without allocating a closure per body piece.
  onHead(head: ResponseHead): void {
    try {
      this.proxy.onHead(this, head);
    } catch (error) {
      this.proxy.stepFailed(this.ex, error);
    }
  }

  onBody(piece: Buffer): void {
    try {
      this.proxy.onBody(this, piece);
    } catch (error) {
      this.proxy.stepFailed(this.ex, error);
    }
  }

  onEnd(): void {
    try {
      this.proxy.onEnd(this);
    } catch (error) {
      this.proxy.stepFailed(this.ex, error);
    }
  }

  onError(error: EngineRequestError): void {
    try {
      this.proxy.onEngineError(this, error);
    } catch (thrown) {
      this.proxy.stepFailed(this.ex, thrown);
    }
  }
}

/** One client request, from arrival to the end of its response. */
class Exchange {
  model = '';
  /** The API key the request came with, when keys are checked. */
  key: RouterKey | undefined;
  /** Its claim on the key's limits, settled when the answer ends. */
  limits: KeyAdmission | undefined;
  /** The engine was asked for a stream's usage chunk the client did not ask for: it is taken out on the way back. */
  stripUsage = false;
  /** Reads the answer's token usage on its way to the client (requests with a key). */
  usageTap: SseUsageTap | undefined;
  usageTail: JsonUsageTail | undefined;
  /** The model's deadlines (its catalog values, else the router's). */
  timeouts: EngineCallTimeouts | undefined;
  body: Buffer = EMPTY;
  /** Request header lines forwarded to the engine, ending with Content-Length and the blank line. */
  headerBlock: string | undefined;
  queuedMs = 0;
  /** Why the first endpoint was chosen (for the debug header). */
  reason: ChoiceReason | undefined;
  attempts = 0;
  first: EndpointState | undefined;
  tried: Set<EndpointState> | undefined;
  current: Attempt | undefined;
  waiter: Waiter | undefined;
  staleRetried = false;
  clientGone = false;
  finished = false;
  sse = false;
  fixedLength = false;
  /** Body length announced by the engine (framing 'length'); the last piece ends the response in the same write. */
  expectedBytes = -1;
  ended = false;
  bytes = 0;
  lastChunk: Buffer | undefined;
  status = 0;
  resume: (() => void) | undefined;
  /** Set while an engine's non-2xx answer is held to be normalised: the header pairs kept, and its body so far. */
  engineError: { headers: string[]; pieces: Buffer[]; bytes: number } | undefined;

  constructor(
    readonly req: ApiRequest,
    readonly res: ApiResponse,
    readonly route: RouteName,
    readonly start: number,
  ) {}
}

const EMPTY = Buffer.alloc(0);
const NO_LABELS: readonly string[] = [];
/** Stream errors handled through 'close'/'aborted' paths; the listener only keeps them from being thrown. */
const ignore = (): void => undefined;

/** True when an SSE byte stream chunk ends an event (`\n\n` or `\r\n\r\n`), so another event may follow cleanly. */
function endsWithBlankLine(chunk: Buffer): boolean {
  const n = chunk.length;
  if (n < 2 || chunk[n - 1] !== 0x0a) return false;
  return chunk[n - 2] === 0x0a || (n >= 4 && chunk[n - 2] === 0x0d && chunk[n - 3] === 0x0a);
}


type UpstreamFailure = 'connect' | 'reset' | 'timeout' | 'status_5xx' | 'stream_cut';

/**
 * The OpenAI API on the hot path, as a plain Node `(req, res)` handler: authenticate → route →
 * read the body once (bounded) → find `model` → resolve it in the catalog → admission → send the
 * **original bytes** to the chosen engine over a pooled keep-alive connection → pass the answer back
 * untouched (SSE included; a non-2xx answer has its body rewritten into the OpenAI error shape,
 * status and message kept) → release. A failure before the first response byte (connect error,
 * reset, timeout, 502/503 from the engine) is retried on another endpoint within the budget;
 * after it, an SSE response ends with an OpenAI-shaped error event and a plain one is closed.
 * Every refusal is OpenAI-shaped (see openai-error.mapper).
 */
export class ProxyHandler {
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
    private readonly metrics: RouterMetrics,
    private readonly pool: EnginePool,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: ProxyOptions,
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

  private route(req: ApiRequest, res: ApiResponse): void {
    const start = performance.now();
    // 1. Authentication comes before anything else, even routing (and the fast front end reads no body it would refuse).
    const check = this.auth.enforcing ? this.auth.check(req.headers.authorization) : undefined;
    if (check !== undefined && !check.ok) {
      this.metrics.authFailures.inc();
      const message = check.reason === 'expired' ? 'The API key has expired.' : 'Missing or invalid API key: send "Authorization: Bearer <key>".';
      const status = sendError(res, 'unauthorized', message, null, {
        'www-authenticate': 'Bearer',
      });
      this.count('', '', status, start);
      return;
    }
    // 2. Route.
    const url = req.url ?? '/';
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
    // 3. Read the body once, bounded.
    const ex = new Exchange(req, res, route.name, start);
    if (check?.ok) ex.key = check.key;
    res.on('close', () => this.onClientClose(ex));
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > this.options.maxBodyBytes) {
      this.refuseTooLarge(ex);
      return;
    }
    if (req instanceof FastRequest) {
      // The fast front end read the whole body already.
      this.step(ex, () => this.onRequestBody(ex, req.body));
      return;
    }
    this.readBody(ex, req);
  }

  /** Reads a Node request's body once, bounded, then goes on with it. */
  private readBody(ex: Exchange, req: IncomingMessage): void {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > this.options.maxBodyBytes) {
        tooLarge = true;
        chunks.length = 0;
        this.refuseTooLarge(ex);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (tooLarge || ex.clientGone) return;
      this.step(ex, () => this.onRequestBody(ex, chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size)));
    });
    req.on('error', ignore);
  }

  /** @internal Runs a step of the exchange; a bug in it answers 500 (or closes a started response) instead of killing the process. */
  step(ex: Exchange, run: () => void): void {
    try {
      run();
    } catch (error) {
      this.stepFailed(ex, error);
    }
  }

  /** @internal A step threw: release what the exchange holds, answer 500 (or close a started response), log an error id. */
  stepFailed(ex: Exchange, error: unknown): void {
    const at = ex.current;
    if (at !== undefined && !at.settled) {
      this.settle(at, 'abandoned');
      at.call?.abort();
    }
    this.internalError(ex.req, ex.res, error);
    this.finish(ex, 500);
  }

  private internalError(req: ApiRequest, res: ApiResponse, error: unknown): void {
    const errorId = randomUUID();
    this.logger.error({ errorId, err: error instanceof Error ? error.stack : String(error), url: req.url }, 'internal error while proxying');
    if (res.headersSent) res.destroy();
    else sendError(res, 'internal', `Internal error in the router (error id ${errorId}).`);
  }

  private refuseTooLarge(ex: Exchange): void {
    this.fail(ex, 'body_too_large', `Request body is larger than the limit of ${this.options.maxBodyBytes} bytes.`, null, { connection: 'close' });
  }

  // 4. Check the JSON and find `model` without building the document (bounded depth), resolve it, ask admission.
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
    const key = ex.key;
    if (this.keyLimits !== undefined && this.keyLimits.needs(key)) {
      void this.keyLimits.admit(key, body).then(
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
      this.metrics.keyLimitRefusals.inc({ reason: result.kind });
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

  private onAdmission(ex: Exchange, admission: Admission): void {
    ex.waiter = undefined;
    if (!admission.ok) {
      const r = admission.refusal;
      this.fail(ex, r.kind, r.message, null, { 'retry-after': r.retryAfterSeconds });
      return;
    }
    const { state, queuedMs, reason } = admission.lease;
    ex.reason = reason;
    if (ex.clientGone) {
      state.release('abandoned');
      this.admission.wake(state.endpoint.model);
      return;
    }
    ex.queuedMs = queuedMs;
    ex.first = state;
    this.send(ex, state);
    this.metrics.overhead.observe(NO_LABELS, (performance.now() - ex.start - queuedMs) / 1000);
  }

  // 5. Forward the original bytes.
  private send(ex: Exchange, state: EndpointState): void {
    ex.attempts++;
    this.metrics.endpointChoices.inc([ex.model, state.id]);
    const t = state.target;
    ex.headerBlock ??= this.headerBlock(ex);
    const head = `POST ${t.basePath}${ex.req.url ?? '/'} HTTP/1.1\r\nhost: ${t.host}\r\n${ex.headerBlock}`;
    const attempt = new Attempt(this, ex, state);
    ex.current = attempt;
    attempt.call = this.pool.request(t, joinForWrite(head, ex.body), attempt, ex.timeouts ?? this.defaultTimeouts);
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

  // 6. Pass the answer back untouched.
  /** @internal */
  onHead(at: Attempt, head: ResponseHead): void {
    const ex = at.ex;
    if (at.settled) return;
    const status = head.status;
    if ((status === 502 || status === 503) && !ex.clientGone && ex.attempts <= this.options.maxRetries) {
      const next = this.nextEndpoint(ex, at.state);
      if (next !== undefined) {
        at.call?.abort();
        this.settle(at, 'failure', 'status_5xx');
        this.retry(ex, next, 'status_5xx', `HTTP ${status}`);
        return;
      }
    }
    ex.status = status;
    ex.sse = false;
    ex.fixedLength = false;
    ex.expectedBytes = -1;
    const raw = head.rawHeaders;
    const headers: string[] = [];
    if (status < 200 || status >= 300) {
      // An engine's error: held whole (bounded) and answered in the OpenAI shape at its end.
      for (let i = 0; i < raw.length; i += 2) if (!DROP_ERROR_RESPONSE.has(raw[i].toLowerCase())) headers.push(raw[i], raw[i + 1]);
      // The engine has answered: a break from here on ends with what it said, never a retry.
      at.responded = true;
      this.metrics.timeToFirstByte.observe([ex.model], (performance.now() - ex.start) / 1000);
      ex.engineError = { headers, pieces: [], bytes: 0 };
      return;
    }
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (DROP_RESPONSE.has(name)) continue;
      if (name === 'content-type' && raw[i + 1].startsWith('text/event-stream')) ex.sse = true;
      else if (name === 'content-length') {
        // Only a length that frames the body is passed on: next to Transfer-Encoding it is void
        // (RFC 9112 §6.3) and the body is sent on chunked.
        if (head.framing !== 'length' && head.framing !== 'none') continue;
        if (head.framing === 'length') {
          ex.fixedLength = true;
          ex.expectedBytes = Number(raw[i + 1]);
        }
      }
      headers.push(raw[i], raw[i + 1]);
    }
    if (ex.key !== undefined) {
      // A stream with a fixed length cannot lose bytes: its usage chunk, if any, stays.
      if (ex.sse) ex.usageTap = new SseUsageTap(ex.stripUsage && !ex.fixedLength);
      else ex.usageTail = new JsonUsageTail();
    }
    if (ex.limits !== undefined) for (const [name, value] of Object.entries(ex.limits.headers)) headers.push(name, value);
    const holdMs = this.options.holdUntilContentMs;
    if (status === 200 && ex.sse && !ex.fixedLength && holdMs > 0 && !ex.clientGone) {
      // 1. Hold the head until the first content: an engine dying before it is then retried elsewhere.
      const held: HeldResponse = { status, headers, pieces: [], bytes: 0, timer: undefined };
      held.timer = setTimeout(() => this.step(ex, () => this.release(at)), holdMs);
      at.held = held;
      return;
    }
    this.respond(at, status, headers);
  }

  /** Starts the client's response: from here a failure cuts it rather than retrying. */
  private respond(at: Attempt, status: number, headers: string[]): void {
    at.responded = true;
    this.metrics.timeToFirstByte.observe([at.ex.model], (performance.now() - at.ex.start) / 1000);
    if (this.options.debugHeader === true && at.ex.reason !== undefined) headers.push(ROUTE_HEADER, routeHeader(at.state.id, at.ex.reason, at.ex.attempts - 1));
    at.ex.res.writeHead(status, headers);
  }

  /** Sends a held head and its preamble on (first content, end of response, or the hold bound). */
  private release(at: Attempt): void {
    const held = at.held;
    if (held === undefined || at.settled) return;
    at.held = undefined;
    clearTimeout(held.timer);
    this.respond(at, held.status, held.headers);
    if (held.bytes > 0) this.forward(at, held.pieces.length === 1 ? held.pieces[0] : Buffer.concat(held.pieces, held.bytes));
  }

  /** @internal */
  onBody(at: Attempt, piece: Buffer): void {
    if (at.settled) return;
    const held = at.held;
    if (held === undefined) {
      this.forward(at, piece);
      return;
    }
    // 2. Held: keep the pieces while they are only preamble; let go at the first content.
    held.pieces.push(piece);
    held.bytes += piece.length;
    if (held.bytes > MAX_HELD_BYTES || !onlyPreamble(Buffer.concat(held.pieces, held.bytes).toString('utf8'))) this.release(at);
  }

  /** Passes a body piece to the client as it is, with backpressure. */
  private forward(at: Attempt, piece: Buffer): void {
    const ex = at.ex;
    const held = ex.engineError;
    if (held !== undefined) {
      const room = ENGINE_ERROR_BODY_LIMIT - held.bytes;
      if (room > 0) {
        const kept = piece.length > room ? piece.subarray(0, room) : piece;
        held.pieces.push(kept);
        held.bytes += kept.length;
      }
      return;
    }
    if (ex.usageTap !== undefined) {
      piece = ex.usageTap.push(piece);
      if (piece.length === 0) return;
    } else ex.usageTail?.push(piece);
    ex.bytes += piece.length;
    ex.lastChunk = piece;
    if (ex.bytes === ex.expectedBytes) {
      // The whole body is here: head, body and end leave in one write.
      ex.ended = true;
      ex.res.end(piece);
      return;
    }
    if (ex.res.write(piece)) return;
    // Backpressure: a slow client slows the engine's stream, never the router's memory.
    at.call?.pause();
    ex.res.once('drain', (ex.resume ??= () => at.call?.resume()));
  }

  /** @internal */
  onEnd(at: Attempt): void {
    if (at.settled) return;
    // A complete response that was all preamble is still a response.
    this.release(at);
    const ex = at.ex;
    const failed = ex.status >= 500;
    this.settle(at, failed ? 'failure' : 'success', failed ? 'status_5xx' : undefined);
    if (ex.engineError !== undefined) this.answerEngineError(ex);
    else if (!ex.ended) {
      const rest = ex.usageTap?.end();
      ex.res.end(rest !== undefined && rest.length > 0 ? rest : undefined);
    }
    this.finish(ex, ex.status);
  }

  /** Answers a held engine error with its status and kept headers, its body in the OpenAI shape. */
  private answerEngineError(ex: Exchange): void {
    const held = ex.engineError;
    if (held === undefined || ex.clientGone) return;
    ex.engineError = undefined;
    const body = Buffer.from(JSON.stringify(engineErrorBody(ex.status, Buffer.concat(held.pieces, held.bytes))));
    ex.bytes = body.length;
    ex.res.writeHead(ex.status, [...held.headers, 'content-type', 'application/json', 'content-length', String(body.length)]);
    ex.res.end(body);
  }

  /** @internal */
  onEngineError(at: Attempt, error: EngineRequestError): void {
    if (at.settled) return;
    const ex = at.ex;
    if (at.responded && ex.engineError !== undefined) {
      // The engine's error answer broke off: answer with what it said so far.
      this.settle(at, 'failure', 'stream_cut');
      at.call?.abort();
      this.answerEngineError(ex);
      this.finish(ex, ex.status);
      return;
    }
    if (at.responded) {
      this.cut(ex, at, error.message);
      return;
    }
    const failure: UpstreamFailure = error.kind === 'connect' ? 'connect' : error.kind === 'timeout' ? 'timeout' : 'reset';
    // A pooled connection the engine closed just as it was reused: not the engine failing.
    if (failure === 'reset' && error.reused && !ex.staleRetried && !ex.clientGone) {
      ex.staleRetried = true;
      this.settle(at, 'abandoned');
      at.state.acquire(this.clock.now());
      ex.attempts--;
      this.send(ex, at.state);
      return;
    }
    this.settle(at, 'failure', failure);
    if (ex.clientGone) return;
    if (ex.attempts <= this.options.maxRetries) {
      const next = this.nextEndpoint(ex, at.state);
      if (next !== undefined) {
        this.retry(ex, next, failure, error.message);
        return;
      }
    }
    this.logger.warn({ requestId: this.requestId(ex), model: ex.model, replicaId: at.state.id, err: error.message, attempts: ex.attempts }, 'engine request failed before a response; no retry left');
    const kind: RouterErrorKind = failure === 'timeout' ? 'upstream_timeout' : 'upstream_unavailable';
    this.fail(ex, kind, `The engine serving model '${ex.model}' failed before answering (${error.message}); tried ${ex.attempts} endpoint(s).`);
  }

  private nextEndpoint(ex: Exchange, failed: EndpointState): EndpointState | undefined {
    if (ex.tried === undefined) {
      ex.tried = new Set();
      if (ex.first !== undefined) ex.tried.add(ex.first);
    }
    ex.tried.add(failed);
    return this.admission.pickForRetry(ex.model, ex.tried);
  }

  private retry(ex: Exchange, next: EndpointState, reason: UpstreamFailure, detail: string): void {
    this.metrics.retries.inc({ model: ex.model, reason });
    if (this.debug) this.logger.debug({ requestId: this.requestId(ex), model: ex.model, replicaId: next.id, reason, detail }, 'retrying on another endpoint');
    ex.tried?.add(next);
    this.send(ex, next);
  }

  /** The response already started: end an SSE stream with an error event, close anything else. */
  private cut(ex: Exchange, at: Attempt, detail: string): void {
    this.settle(at, 'failure', 'stream_cut');
    at.call?.abort();
    this.metrics.streamErrors.inc({ model: ex.model });
    this.logger.warn({ requestId: this.requestId(ex), model: ex.model, replicaId: at.state.id, err: detail, bytes: ex.bytes }, 'engine response cut after it started');
    if (!ex.clientGone) {
      const res = ex.res;
      if (ex.sse && !ex.fixedLength) {
        const last = ex.lastChunk;
        const atBoundary = last === undefined || endsWithBlankLine(last);
        const event = sseErrorEvent('stream_interrupted', `The engine serving model '${ex.model}' stopped in the middle of the response: ${detail}`);
        // A complete chunked body: the client's connection stays usable. Closing it here raced
        // the client's next request on the same keep-alive connection ("fetch failed").
        res.end(atBoundary ? event : `\n\n${event}`);
      } else {
        res.destroy();
      }
    }
    this.finish(ex, ex.status);
  }

  private settle(at: Attempt, outcome: 'success' | 'failure' | 'abandoned', failure?: UpstreamFailure): void {
    if (at.settled) return;
    at.settled = true;
    if (at.held !== undefined) {
      clearTimeout(at.held.timer);
      at.held = undefined;
    }
    // Counted first: releasing a removed endpoint's last request forgets its series.
    if (failure !== undefined) this.metrics.upstreamErrors.inc({ endpoint: at.state.id, kind: failure });
    at.state.release(outcome);
    this.admission.wake(at.state.endpoint.model);
  }

  private onClientClose(ex: Exchange): void {
    if (ex.res.writableFinished || ex.clientGone) return;
    ex.clientGone = true;
    ex.waiter?.cancel();
    const at = ex.current;
    if (at !== undefined && !at.settled) {
      this.settle(at, 'abandoned');
      at.call?.abort();
    }
    // 499: nginx's "client closed request".
    this.finish(ex, 499);
  }

  private fail(ex: Exchange, kind: RouterErrorKind, message: string, param: string | null = null, headers?: ErrorHeaders): void {
    if (ex.clientGone || ex.finished) return;
    const status = sendError(ex.res, kind, message, param, headers);
    this.finish(ex, status);
  }

  private finish(ex: Exchange, status: number): void {
    if (ex.finished) return;
    ex.finished = true;
    if (this.options.keyMetrics === true && ex.key !== undefined) this.metrics.keyRequests.inc([ex.key.name, ex.model, String(status)]);
    this.settleLimits(ex, status);
    this.count(ex.route, ex.model, status, ex.start);
    if (ex.bytes > 0) this.metrics.responseBytes.inc([ex.model], ex.bytes);
    if (this.debug) {
      this.logger.debug(
        { requestId: this.requestId(ex), model: ex.model, replicaId: ex.current?.state.id, status, attempts: ex.attempts, queuedMs: ex.queuedMs, bytes: ex.bytes },
        'request finished',
      );
    }
  }

  /** Settles the request's claim on its key's limits with the tokens its answer used, and counts them. */
  private settleLimits(ex: Exchange, status: number): void {
    const usage = ex.usageTap?.usage ?? ex.usageTail?.usage();
    if (usage !== undefined) {
      this.metrics.tokens.inc([ex.model, 'prompt'], usage.promptTokens);
      this.metrics.tokens.inc([ex.model, 'completion'], usage.completionTokens);
      if (this.options.keyMetrics === true && ex.key !== undefined) {
        this.metrics.keyTokens.inc([ex.key.name, ex.model, 'prompt'], usage.promptTokens);
        this.metrics.keyTokens.inc([ex.key.name, ex.model, 'completion'], usage.completionTokens);
      }
      if (ex.key !== undefined) this.keyUsage?.(ex.key.name, ex.model, usage);
    }
    const admission = ex.limits;
    if (admission === undefined || this.keyLimits === undefined) return;
    ex.limits = undefined;
    this.keyLimits.settle(admission, usage, status >= 200 && status < 300).catch((error: unknown) => this.logger.debug({ err: error }, 'key limits: settle failed; the claim lapses with its window'));
  }

  private count(route: string, model: string, status: number, start: number): void {
    this.metrics.requests.inc([route, model, String(status)]);
    this.metrics.requestDuration.observe([route, model], (performance.now() - start) / 1000);
  }

  private requestId(ex: Exchange): string {
    const given = ex.req.headers['x-request-id'];
    if (typeof given === 'string' && given !== '') return given;
    const id = randomUUID();
    ex.req.headers['x-request-id'] = id;
    return id;
  }

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
