import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '@llmgw/domain';
import { BatchScheduler, type SequenceStats } from './batch.scheduler';
import type { SimConfig } from './cli.parser';
import { embedTokens, toBase64 } from './embedding.vector';
import { newRequestCounters, renderLlamacppMetrics, renderVllmMetrics, type RequestCounters } from './metrics.renderer';
import {
  chatCompletionBody,
  chatContentChunk,
  chatFinishChunk,
  chatRoleChunk,
  completionBody,
  completionFinishChunk,
  completionTextChunk,
  embeddingBody,
  errorBody,
  sse,
  SSE_DONE,
  usageChunk,
  type ChoiceResult,
  type FinishReason,
  type ResponseHead,
  type Usage,
} from './openai-response.builder';
import {
  parseChatRequest,
  parseCompletionRequest,
  parseEmbeddingRequest,
  parseJsonBody,
  type EmbeddingRequest,
  type GenerationRequest,
  type Parsed,
  type RequestProblem,
} from './openai-request.parser';
import { outputTokenText } from './prompt.tokenizer';
import { renderLlamacppSlots } from './slots.renderer';
import { SchedulerDriver } from './scheduler.driver';
import { hashInts, hashParts, SeededRng } from './seeded.rng';

/** What the server needs from its process: clocks, a line printer and a way to die. */
export interface ServerDeps {
  /** Monotonic milliseconds; drives the model. */
  clock: Clock;
  /** Milliseconds since the epoch; for `created` fields. */
  wallClock: Clock;
  /** Writes one line to stdout (the machine-readable announcements). */
  announce(line: string): void;
  /** Writes one diagnostic line to stderr. */
  warn(line: string): void;
  /** Ends the process (the --crash-after knob). */
  exit(code: number): void;
}

const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** One choice being generated: its plan, its RNG for token text, and what it produced. */
interface ChoiceRun {
  index: number;
  promptIndex: number;
  prompt: number[];
  rng: SeededRng;
  planned: number;
  finishReason: FinishReason;
  text: string[];
  stats?: SequenceStats;
  roleSent: boolean;
  done: boolean;
}

class HttpProblem extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param?: string,
  ) {
    super(message);
  }
}

/**
 * The simulated engine over raw node:http: the OpenAI API, /metrics and /health of either vLLM
 * or llama-server (and llama-server's /slots), backed by the modelled BatchScheduler.
 *
 * Lifecycle: `start()` models loading as the real engine does it (vLLM binds its port only once
 * loaded; llama-server binds at once and answers 503 "Loading model" until loaded) and resolves
 * with the bound port. `close()` stops everything, dropping open connections, hung ones included.
 */
export class SimEngineServer {
  private readonly server: Server;
  private readonly driver: SchedulerDriver;
  private readonly counters: RequestCounters = newRequestCounters();
  private readonly faultRng: SeededRng;
  private ready = false;
  private closed = false;
  private loadTimer?: NodeJS.Timeout;
  private cancelLoad?: () => void;
  private requestsStarted = 0;
  private responses = 0;
  private crashing = false;

  constructor(
    readonly config: SimConfig,
    private readonly deps: ServerDeps,
  ) {
    this.driver = new SchedulerDriver(new BatchScheduler(config, deps.clock), deps.clock);
    this.faultRng = new SeededRng(hashParts(config.seed, 'faults'));
    this.server = createServer((req, res) => {
      this.route(req, res).catch((err: unknown) => {
        this.deps.warn(`sim-engine: internal error: ${err instanceof Error ? err.message : String(err)}`);
        if (!res.headersSent) this.sendError(res, 500, 'Internal server error');
        else res.destroy();
      });
    });
    // Engines keep idle connections longer than typical clients and never time a request out.
    this.server.keepAliveTimeout = 65_000;
    this.server.headersTimeout = 66_000;
    this.server.requestTimeout = 0;
  }

  /** The primary served name (metrics label, /v1/models root when no model path was given). */
  get modelName(): string {
    return this.config.servedModelNames[0];
  }

  /** Models loading, binds, and resolves with the bound port once listening (see class comment). */
  async start(): Promise<number> {
    const { engine, loadSeconds } = this.config;
    this.deps.announce(`sim-engine loading ${engine} model ${this.modelName} for ${loadSeconds}s`);
    if (engine === 'vllm') {
      await this.loadDelay(loadSeconds);
      const port = await this.listen();
      this.becomeReady();
      return port;
    }
    const port = await this.listen();
    void this.loadDelay(loadSeconds).then(
      () => this.becomeReady(),
      () => undefined,
    );
    return port;
  }

  /** Stops listening, drops every connection and the model's timers. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelLoad?.();
    this.driver.stop();
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private loadDelay(seconds: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('closed while loading'));
      this.cancelLoad = () => {
        if (this.loadTimer) clearTimeout(this.loadTimer);
        reject(new Error('closed while loading'));
      };
      this.loadTimer = setTimeout(resolve, seconds * 1000);
    });
  }

  private listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      this.server.listen(this.config.port, this.config.host, () => {
        this.server.off('error', onError);
        const port = (this.server.address() as AddressInfo).port;
        const host = this.config.host.includes(':') ? `[${this.config.host}]` : this.config.host;
        this.deps.announce(`sim-engine listening on http://${host}:${port}`);
        resolve(port);
      });
    });
  }

  private becomeReady(): void {
    if (this.closed) return;
    this.ready = true;
    this.deps.announce('sim-engine ready');
  }

  // ---- routing -------------------------------------------------------------------------

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    const llama = this.config.engine === 'llamacpp';
    if (!this.ready) {
      // Only llama-server listens while loading, and it answers everything with this.
      req.resume();
      this.sendJson(res, 503, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
      return;
    }
    const routes: Record<string, { method: string; handle: () => Promise<void> | void }> = {
      '/health': { method: 'GET', handle: () => this.health(res) },
      '/metrics': { method: 'GET', handle: () => this.metrics(res) },
      '/v1/models': { method: 'GET', handle: () => this.models(req, res) },
      '/v1/chat/completions': { method: 'POST', handle: () => this.inference(req, res, 'chat') },
      '/v1/completions': { method: 'POST', handle: () => this.inference(req, res, 'completion') },
      '/v1/embeddings': { method: 'POST', handle: () => this.inference(req, res, 'embedding') },
    };
    if (llama) {
      routes['/v1/health'] = routes['/health'];
      routes['/slots'] = { method: 'GET', handle: () => this.slots(res) };
    }
    const route = routes[path];
    if (route === undefined) {
      req.resume();
      this.sendError(res, 404, `Not Found: ${method} ${path}`);
      return;
    }
    if (route.method !== method) {
      req.resume();
      res.setHeader('allow', route.method);
      this.sendError(res, 405, `Method Not Allowed: ${method} ${path}`);
      return;
    }
    await route.handle();
  }

  private health(res: ServerResponse): void {
    if (this.config.engine === 'llamacpp') this.sendJson(res, 200, { status: 'ok' });
    else {
      res.writeHead(200, { 'content-length': '0' });
      res.end();
    }
  }

  private metrics(res: ServerResponse): void {
    if (!this.config.metrics) {
      this.sendError(res, 501, 'This server does not support metrics endpoint. Start it with `--metrics`');
      return;
    }
    const snapshot = this.driver.snapshot();
    const options = { modelName: this.modelName, kvMetric: this.config.kvMetric, legacyKvMetric: this.config.legacyKvMetric, kvBlockSize: this.config.blockSize };
    const text = this.config.engine === 'vllm' ? renderVllmMetrics(snapshot, this.counters, options) : renderLlamacppMetrics(snapshot, options);
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  /** llama-server's GET /slots (one entry per -np slot, the busy ones marked); 501 with --no-slots, as llama-server answers. */
  private slots(res: ServerResponse): void {
    if (!this.config.slots) {
      this.sendError(res, 501, 'This server does not support slots endpoint. Start it with `--slots`');
      return;
    }
    const { running } = this.driver.snapshot();
    this.sendJson(res, 200, renderLlamacppSlots(running, { parallel: this.config.maxRunning, slotContext: this.config.maxModelLen }));
  }

  private models(req: IncomingMessage, res: ServerResponse): void {
    if (!this.authorised(req, res)) return;
    const created = Math.floor(this.deps.wallClock.now() / 1000);
    const c = this.config;
    const data =
      c.engine === 'vllm'
        ? c.servedModelNames.map((id) => ({
            id,
            object: 'model',
            created,
            owned_by: 'vllm',
            root: c.modelPath ?? id,
            parent: null,
            max_model_len: c.maxModelLen,
          }))
        : c.servedModelNames.map((id) => ({
            id,
            object: 'model',
            created,
            owned_by: 'llamacpp',
            meta: { n_ctx_train: c.maxModelLen, n_embd: c.embeddingDim, n_ctx: c.kvCapacityTokens, n_parallel: c.maxRunning },
          }));
    this.sendJson(res, 200, { object: 'list', data });
  }

  // ---- inference -----------------------------------------------------------------------

  private async inference(req: IncomingMessage, res: ServerResponse, kind: 'chat' | 'completion' | 'embedding'): Promise<void> {
    if (!this.authorised(req, res)) {
      req.resume();
      return;
    }
    let request: GenerationRequest | EmbeddingRequest;
    try {
      const raw = await this.readBody(req);
      const body = unwrap(parseJsonBody(raw));
      const parsed: Parsed<GenerationRequest | EmbeddingRequest> =
        kind === 'chat' ? parseChatRequest(body) : kind === 'completion' ? parseCompletionRequest(body) : parseEmbeddingRequest(body, this.config.embeddingDim);
      request = unwrap(parsed);
      if (!this.config.servedModelNames.includes(request.model)) {
        throw new HttpProblem(404, `The model \`${request.model}\` does not exist.`, 'model');
      }
      this.checkContext(request);
    } catch (err) {
      if (err instanceof HttpProblem) {
        this.sendError(res, err.status, err.message, err.param);
        return;
      }
      throw err;
    }
    if (!this.passFaults(res)) return;
    if (request.kind === 'embedding') this.embed(res, request);
    else this.generate(res, request);
  }

  /** Refuses a request whose prompt (+ requested completion) exceeds the context length, with vLLM's wording. */
  private checkContext(request: GenerationRequest | EmbeddingRequest): void {
    const max = this.config.maxModelLen;
    const prompts = request.kind === 'embedding' ? request.inputs : request.prompts;
    for (const { tokens } of prompts) {
      const maxTokens = request.kind === 'embedding' ? 0 : (request.maxTokens ?? 0);
      const noRoom = request.kind !== 'embedding' && tokens.length >= max;
      if (tokens.length + maxTokens > max || noRoom) {
        const message =
          maxTokens > 0
            ? `This model's maximum context length is ${max} tokens. However, you requested ${tokens.length + maxTokens} tokens (${tokens.length} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`
            : `This model's maximum context length is ${max} tokens. However, your request has ${tokens.length} input tokens. Please reduce the length of the input messages.`;
        throw new HttpProblem(400, message);
      }
    }
  }

  /** Applies the fault knobs to a request that is about to start; false when it must not proceed. */
  private passFaults(res: ServerResponse): boolean {
    const n = ++this.requestsStarted;
    const { crashAfter, hang, errorRate } = this.config;
    if (crashAfter !== undefined && n >= crashAfter) {
      if (!this.crashing) {
        this.crashing = true;
        this.deps.warn(`sim-engine: crashing after ${n} requests started (--crash-after ${crashAfter})`);
        setImmediate(() => this.deps.exit(1));
      }
      return false;
    }
    if (hang) return false; // accepted, never answered; close() drops the connection
    if (errorRate > 0 && this.faultRng.next() < errorRate) {
      this.sendError(res, 500, 'Simulated engine failure (--error-rate)');
      return false;
    }
    return true;
  }

  private planChoices(request: GenerationRequest): ChoiceRun[] {
    const c = this.config;
    const lo = Math.max(1, Math.round(c.outputTokens * (1 - c.outputJitter)));
    const hi = Math.max(lo, Math.round(c.outputTokens * (1 + c.outputJitter)));
    const runs: ChoiceRun[] = [];
    request.prompts.forEach(({ tokens }, p) => {
      for (let choice = 0; choice < request.n; choice++) {
        // With a request seed the same prompt gives the same output; without, each request differs.
        const seed =
          request.seed !== undefined
            ? hashParts(c.seed, 'seeded', request.seed, hashInts(0, tokens), choice)
            : hashParts(c.seed, 'request', this.requestsStarted, p, choice);
        const rng = new SeededRng(seed);
        const natural = rng.int(lo, hi);
        const room = c.maxModelLen - tokens.length;
        const cap = Math.min(request.maxTokens ?? room, room);
        const planned = request.ignoreEos ? cap : Math.min(natural, cap);
        const finishReason: FinishReason = !request.ignoreEos && planned === natural ? 'stop' : 'length';
        runs.push({ index: p * request.n + choice, promptIndex: p, prompt: tokens, rng, planned, finishReason, text: [], roleSent: false, done: false });
      }
    });
    return runs;
  }

  private generate(res: ServerResponse, request: GenerationRequest): void {
    const runs = this.planChoices(request);
    const head = this.head(request.kind === 'chat' ? 'chatcmpl' : 'cmpl', request.model);
    const chat = request.kind === 'chat';
    let remaining = runs.length;
    let finished = false;
    let tokensOut = 0;
    let corked = false;

    const write = (text: string): void => {
      if (!res.headersSent) {
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-request-id': head.id });
      }
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(() => {
          corked = false;
          res.uncork();
        });
      }
      res.write(text);
    };
    const abort = (): void => {
      finished = true;
      for (const run of runs) if (!run.done && run.stats && this.driver.cancel(run.stats)) this.counters.finished.abort++;
    };
    res.on('close', () => {
      if (!finished) abort();
    });

    const complete = (): void => {
      finished = true;
      const usage = this.usage(runs, request);
      if (request.stream) {
        if (request.includeUsage) write(sse(usageChunk(head, request.kind, usage)));
        write(SSE_DONE);
        res.end();
        return;
      }
      const choices: ChoiceResult[] = runs.map((r) => ({ index: r.index, text: r.text.join(''), finishReason: r.finishReason }));
      const extra = this.config.engine === 'llamacpp' ? { timings: this.llamaTimings(runs) } : {};
      const body = chat ? chatCompletionBody(head, choices, usage, extra) : completionBody(head, choices, usage, extra);
      this.sendJson(res, 200, body, { 'x-request-id': head.id, ...this.timingHeaders(runs) });
    };

    for (const run of runs) {
      run.stats = this.driver.submit(
        { promptTokens: run.prompt, outputTokens: run.planned },
        {
          onToken: (index) => {
            if (finished) return;
            if (request.stream && this.config.failBeforeContent) {
              // The head and the role-only chunk go out, then the engine "dies" before any content.
              if (chat) write(sse(chatRoleChunk(head, run.index)));
              else res.flushHeaders();
              abort();
              res.uncork();
              if (res.socket) res.socket.end();
              else res.destroy();
              return;
            }
            const piece = outputTokenText(index, run.rng.next());
            run.text.push(piece);
            if (request.stream) {
              if (chat && !run.roleSent) write(sse(chatRoleChunk(head, run.index)));
              run.roleSent = true;
              write(sse(chat ? chatContentChunk(head, run.index, piece) : completionTextChunk(head, run.index, piece)));
            }
            tokensOut++;
            const failAfter = this.config.failMidStreamAfter;
            if (failAfter !== undefined && tokensOut >= failAfter) {
              // Deliver what was written, then drop the connection without finishing the response.
              abort();
              res.uncork();
              if (res.socket) res.socket.end();
              else res.destroy();
            }
          },
          onDone: (stats) => {
            if (finished) return;
            run.done = true;
            this.record(run.finishReason, stats);
            if (request.stream) {
              write(sse(chat ? chatFinishChunk(head, run.index, run.finishReason) : completionFinishChunk(head, run.index, run.finishReason)));
            }
            if (--remaining === 0) complete();
          },
        },
      );
    }
  }

  private embed(res: ServerResponse, request: EmbeddingRequest): void {
    const head = this.head('embd', request.model);
    const dim = request.dimensions ?? this.config.embeddingDim;
    let remaining = request.inputs.length;
    let finished = false;
    const stats: SequenceStats[] = [];
    res.on('close', () => {
      if (finished) return;
      finished = true;
      for (const s of stats) if (this.driver.cancel(s)) this.counters.finished.abort++;
    });
    for (const input of request.inputs) {
      stats.push(
        this.driver.submit(
          { promptTokens: input.tokens, outputTokens: 0 },
          {
            onDone: (s) => {
              if (finished) return;
              this.record('stop', s);
              if (--remaining > 0) return;
              finished = true;
              const vectors = request.inputs.map(({ tokens }) => {
                const v = embedTokens(tokens, dim);
                return request.encodingFormat === 'base64' ? toBase64(v) : Array.from(v);
              });
              const promptTokens = request.inputs.reduce((sum, i) => sum + i.tokens.length, 0);
              this.sendJson(res, 200, embeddingBody(head, vectors, promptTokens), { 'x-request-id': head.id });
            },
          },
        ),
      );
    }
  }

  private record(reason: FinishReason, s: SequenceStats): void {
    this.counters.finished[reason]++;
    if (s.firstTokenAt !== undefined) this.counters.ttft.observe((s.firstTokenAt - s.arrivedAt) / 1000);
    if (s.finishedAt !== undefined) this.counters.e2e.observe((s.finishedAt - s.arrivedAt) / 1000);
  }

  private usage(runs: ChoiceRun[], request: GenerationRequest): Usage {
    let prompt = 0;
    let cached = 0;
    request.prompts.forEach((p, i) => {
      prompt += p.tokens.length;
      cached += Math.max(0, ...runs.filter((r) => r.promptIndex === i).map((r) => r.stats?.cachedTokens ?? 0));
    });
    const completion = runs.reduce((sum, r) => sum + r.text.length, 0);
    return {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: this.config.prefixCaching ? { cached_tokens: cached } : null,
    };
  }

  /** Modelled durations of a finished request (max over its choices), milliseconds with 3 decimals. */
  private timingHeaders(runs: ChoiceRun[]): Record<string, string> {
    const max = (f: (s: SequenceStats) => number): string => Math.max(...runs.map((r) => (r.stats ? f(r.stats) : 0))).toFixed(3);
    return {
      'x-sim-queue-ms': max((s) => (s.admittedAt ?? s.arrivedAt) - s.arrivedAt),
      'x-sim-prefill-ms': max((s) => (s.firstTokenAt ?? 0) - (s.admittedAt ?? 0)),
      'x-sim-decode-ms': max((s) => (s.finishedAt ?? 0) - (s.firstTokenAt ?? 0)),
      'x-sim-cached-tokens': String(runs.reduce((sum, r) => sum + (r.stats?.cachedTokens ?? 0), 0)),
    };
  }

  /** llama-server's `timings` object, from the first choice's modelled timeline. */
  private llamaTimings(runs: ChoiceRun[]): object {
    const s = runs[0].stats;
    if (s === undefined) return {};
    const promptN = s.promptTokens - s.cachedTokens;
    const promptMs = (s.firstTokenAt ?? 0) - (s.admittedAt ?? 0);
    const predictedN = s.generatedTokens;
    const predictedMs = (s.finishedAt ?? 0) - (s.firstTokenAt ?? 0);
    return {
      cache_n: s.cachedTokens,
      prompt_n: promptN,
      prompt_ms: promptMs,
      prompt_per_token_ms: promptN > 0 ? promptMs / promptN : 0,
      prompt_per_second: promptMs > 0 ? (promptN * 1000) / promptMs : 0,
      predicted_n: predictedN,
      predicted_ms: predictedMs,
      predicted_per_token_ms: predictedN > 0 ? predictedMs / predictedN : 0,
      predicted_per_second: predictedMs > 0 ? (predictedN * 1000) / predictedMs : 0,
    };
  }

  // ---- helpers -------------------------------------------------------------------------

  private head(prefix: string, model: string): ResponseHead {
    const n = ++this.responses;
    const id = `${prefix}-${hashParts(this.config.seed, 'id', n).toString(16).padStart(14, '0')}${n.toString(16).padStart(6, '0')}`;
    return { id, created: Math.floor(this.deps.wallClock.now() / 1000), model };
  }

  private authorised(req: IncomingMessage, res: ServerResponse): boolean {
    const key = this.config.apiKey;
    if (key === undefined || req.headers.authorization === `Bearer ${key}`) return true;
    this.sendError(res, 401, 'Unauthorized: missing or wrong API key');
    return false;
  }

  private readBody(req: IncomingMessage): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          // Stop keeping it, drain the rest, answer 413.
          req.removeAllListeners('data');
          req.resume();
          reject(new HttpProblem(413, `Request body larger than ${MAX_BODY_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      req.on('error', reject);
    });
  }

  private sendError(res: ServerResponse, status: number, message: string, param?: string): void {
    this.sendJson(res, status, errorBody(this.config.engine, status, message, param));
  }

  private sendJson(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
    if (res.headersSent || res.destroyed) return;
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }
}

function unwrap<T>(parsed: Parsed<T>): T {
  if (parsed.ok) return parsed.value;
  const p: RequestProblem = parsed.problem;
  throw new HttpProblem(p.status, p.message, p.param);
}
