import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { slotContextSize, type EngineConfig } from './cli.parser';
import { emptyStats, renderMetrics, type EngineStats } from './metrics.renderer';
import { ModelWorkerClient, type GenerationResult, type ModelInfo } from './model-worker.client';
import {
  completeResponse,
  errorBody,
  finalChunk,
  responseHead,
  roleChunk,
  sse,
  textChunk,
  usageChunk,
  type Endpoint,
  type Outcome,
  type ResponseHead,
} from './openai-response.builder';
import { parseChatRequest, parseCompletionRequest, parseJsonBody, RequestError, type ParsedRequest } from './request.parser';
import { SlotScheduler } from './slot.scheduler';

/** Largest request body accepted, in bytes. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;
/** On shutdown, how long responses ended with an error may take to reach their clients. */
const SHUTDOWN_FLUSH_MS = 500;

/** Where the engine is: loading the model, serving, or failed (the process exits soon after). */
export type EnginePhase =
  | { kind: 'loading' }
  | { kind: 'ready'; slotContextSize: number; model: ModelInfo }
  | { kind: 'failed'; message: string };

/** One request from arrival to its last byte. */
interface Job {
  readonly endpoint: Endpoint;
  readonly request: ParsedRequest;
  readonly res: ServerResponse;
  readonly head: ResponseHead;
  /** llama-server's task id, shown in /slots. */
  readonly task: number;
  slot?: number;
  workerId?: number;
  promptTokens: number;
  completionTokens: number;
  /** Text of a non-streamed response, collected. */
  text: string;
  /** The client went away before the end. */
  gone: boolean;
  /** The response has been ended by us. */
  ended: boolean;
  /** Stream headers are out: errors from here on go into the stream. */
  streaming: boolean;
}

/** Callbacks into the process that owns the engine. */
export interface EngineHooks {
  log(line: string): void;
  /** The engine can no longer serve (model failed to load, worker died): the owner should exit non-zero. */
  fatal(message: string): void;
}

/**
 * llama-server's HTTP API over one model worker: `/health`, `/metrics`, `/slots`, `/v1/models`,
 * `/v1/chat/completions`, `/v1/completions` (and their unprefixed aliases). Listens before the
 * model is loaded (503 "Loading model" meanwhile); up to `parallel` generations run at once,
 * the rest wait FIFO.
 */
export class LlamaEngine {
  #phase: EnginePhase = { kind: 'loading' };
  readonly #server: Server;
  readonly #stats: EngineStats = emptyStats();
  readonly #scheduler: SlotScheduler<Job>;
  readonly #running = new Set<Job>();
  #worker: ModelWorkerClient | undefined;
  /** The loaded model, between `model-loaded` and `ready`. */
  #pendingModel: ModelInfo | undefined;
  #tasks = 0;
  #stopping = false;

  constructor(
    private readonly config: EngineConfig,
    private readonly hooks: EngineHooks,
  ) {
    this.#scheduler = new SlotScheduler<Job>(config.parallel, (job, slot) => this.#start(job, slot));
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  /** The current phase. */
  get phase(): EnginePhase {
    return this.#phase;
  }

  /** Process id of the model worker, once started. */
  get workerPid(): number | undefined {
    return this.#worker?.pid;
  }

  /** Listens on the configured address, then starts loading the model; resolves with the bound address. */
  async start(): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(this.config.port, this.config.host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    this.#startWorker();
    return this.#server.address() as AddressInfo;
  }

  /** Stops accepting, ends every open response and the worker. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    // Queued and running requests get an error (an SSE error event once streaming); the worker
    // is stopped without waiting for their generations.
    const open = [...this.#scheduler.drain(), ...this.#running];
    for (const job of open) this.#fail(job, 503, 'unavailable_error', 'the engine is shutting down');
    this.#server.closeIdleConnections();
    const worker = this.#worker?.stop() ?? Promise.resolve();
    // Let those last bytes reach the clients, briefly, before cutting every connection.
    const flushed = Promise.all(
      open.map(
        (job) =>
          new Promise<void>((resolve) => {
            if (job.res.writableFinished || job.res.destroyed) return resolve();
            job.res.once('finish', resolve).once('close', resolve);
          }),
      ),
    );
    await Promise.race([flushed, new Promise((resolve) => setTimeout(resolve, SHUTDOWN_FLUSH_MS).unref())]);
    this.#server.closeAllConnections();
    await Promise.all([closed, worker]);
  }

  #startWorker(): void {
    const { config } = this;
    const worker = new ModelWorkerClient({
      modelLoaded: (info) => {
        const perSlot = slotContextSize(config, info.trainContextSize);
        this.hooks.log(`model loaded: training context ${info.trainContextSize}, creating ${config.parallel} slot(s) of ${perSlot} tokens`);
        this.#phase = { kind: 'loading' };
        this.#pendingModel = info;
        worker.createContext(perSlot, config.parallel, config.threads);
      },
      ready: (perSlot) => {
        if (this.#pendingModel === undefined) return;
        this.#phase = { kind: 'ready', slotContextSize: perSlot, model: this.#pendingModel };
        this.#stats.kvCapacity = perSlot * config.parallel;
        this.hooks.log(`model ready: ${config.parallel} slot(s) x ${perSlot} tokens, ${config.threads} thread(s)`);
      },
      loadFailed: (message) => this.#failEngine(`Loading model failed: ${message}`),
      exited: (code, signal) => {
        if (this.#stopping) return;
        const how = signal !== null ? `signal ${signal}` : `code ${code}`;
        this.#failEngine(
          this.#phase.kind === 'ready'
            ? `the model worker exited (${how})`
            : this.#phase.kind === 'failed'
              ? this.#phase.message
              : `Loading model failed: the model worker exited (${how}); the model file may be malformed`,
        );
      },
    });
    this.#worker = worker;
    this.hooks.log(`model worker started (pid ${worker.pid}), loading ${config.modelPath}`);
    worker.load(config.modelPath, config.threads, config.debugLoadDelayMs);
  }

  #failEngine(message: string): void {
    if (this.#phase.kind === 'failed') return;
    this.#phase = { kind: 'failed', message };
    this.hooks.log(`error: ${message}`);
    for (const job of this.#scheduler.drain()) this.#fail(job, 500, 'server_error', message);
    this.hooks.fatal(message);
  }

  // ---- HTTP -------------------------------------------------------------------------------

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    try {
      if (method === 'GET' && (path === '/health' || path === '/v1/health')) return this.#health(res);
      if (method === 'GET' && path === '/metrics') return this.#metrics(res);
      if (method === 'GET' && (path === '/v1/models' || path === '/models')) return this.#models(res);
      if (method === 'GET' && path === '/slots') {
        if (this.#gate(res)) this.#slots(res);
        return;
      }
      if (method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions')) return this.#generate(req, res, 'chat');
      if (method === 'POST' && (path === '/v1/completions' || path === '/completions')) return this.#generate(req, res, 'completion');
      sendJson(res, 404, errorBody(404, 'not_found_error', `File Not Found: ${method} ${path}`));
    } catch (error) {
      this.hooks.log(`error: ${method} ${path}: ${error instanceof Error ? error.message : String(error)}`);
      if (!res.headersSent) sendJson(res, 500, errorBody(500, 'server_error', 'internal error'));
      else res.destroy();
    }
  }

  /** True when the engine is ready; otherwise answers 503 (loading) or 500 (failed) and returns false. */
  #gate(res: ServerResponse): boolean {
    if (this.#phase.kind === 'ready') return true;
    if (this.#phase.kind === 'loading') sendJson(res, 503, errorBody(503, 'unavailable_error', 'Loading model'));
    else sendJson(res, 500, errorBody(500, 'server_error', this.#phase.message));
    return false;
  }

  #health(res: ServerResponse): void {
    if (this.#gate(res)) sendJson(res, 200, { status: 'ok' });
  }

  #metrics(res: ServerResponse): void {
    if (!this.config.metrics) {
      sendJson(res, 501, errorBody(501, 'not_supported_error', 'This server does not support metrics endpoint. Start it with `--metrics`'));
      return;
    }
    this.#stats.processing = this.#scheduler.processing;
    this.#stats.deferred = this.#scheduler.deferred;
    let kv = 0;
    for (const job of this.#running) kv += job.promptTokens + job.completionTokens;
    this.#stats.kvTokens = kv;
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
    res.end(renderMetrics(this.#stats));
  }

  #models(res: ServerResponse): void {
    const phase = this.#phase;
    const meta =
      phase.kind === 'ready'
        ? {
            n_ctx_train: phase.model.trainContextSize,
            n_ctx_slot: phase.slotContextSize,
            ...(phase.model.embeddingSize !== undefined ? { n_embd: phase.model.embeddingSize } : {}),
            ...(phase.model.parameters !== undefined ? { n_params: phase.model.parameters } : {}),
            size: phase.model.sizeBytes,
          }
        : undefined;
    sendJson(res, 200, {
      object: 'list',
      data: [{ id: this.config.alias, object: 'model', created: Math.floor(Date.now() / 1000), owned_by: 'llamacpp', ...(meta ? { meta } : {}) }],
    });
  }

  #slots(res: ServerResponse): void {
    const perSlot = this.#phase.kind === 'ready' ? this.#phase.slotContextSize : 0;
    const slots = [];
    for (let id = 0; id < this.#scheduler.size; id++) {
      const job = this.#scheduler.holder(id);
      const p = job?.request.params;
      slots.push({
        id,
        id_task: job?.task ?? -1,
        n_ctx: perSlot,
        speculative: false,
        is_processing: job !== undefined,
        ...(p
          ? {
              params: {
                n_predict: p.maxTokens ?? -1,
                temperature: p.temperature,
                top_k: p.topK,
                top_p: p.topP,
                min_p: p.minP,
                ...(p.seed !== undefined ? { seed: p.seed } : {}),
                stop: p.stop,
                stream: job?.request.stream,
              },
            }
          : {}),
        next_token: {
          has_next_token: job !== undefined,
          n_remain: job === undefined || p?.maxTokens === undefined ? -1 : Math.max(0, p.maxTokens - job.completionTokens),
          n_decoded: job?.completionTokens ?? 0,
        },
      });
    }
    sendJson(res, 200, slots);
  }

  #generate(req: IncomingMessage, res: ServerResponse, endpoint: Endpoint): void {
    if (!this.#gate(res)) {
      req.resume();
      return;
    }
    readBody(req, MAX_BODY_BYTES)
      .then((text) => {
        if (this.#stopping) return sendJson(res, 503, errorBody(503, 'unavailable_error', 'the engine is shutting down'));
        if (!this.#gate(res)) return;
        let request: ParsedRequest;
        try {
          const body = parseJsonBody(text);
          request = endpoint === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body);
        } catch (error) {
          if (error instanceof RequestError) return sendJson(res, 400, errorBody(400, 'invalid_request_error', error.message, error.param));
          throw error;
        }
        this.#admit(endpoint, request, res);
      })
      .catch((error: unknown) => {
        if (error instanceof BodyTooLarge) return sendJson(res, 413, errorBody(413, 'invalid_request_error', error.message));
        if (res.headersSent || res.destroyed) return;
        this.hooks.log(`error: reading request: ${error instanceof Error ? error.message : String(error)}`);
        sendJson(res, 400, errorBody(400, 'invalid_request_error', 'could not read the request body'));
      });
  }

  #admit(endpoint: Endpoint, request: ParsedRequest, res: ServerResponse): void {
    if (res.destroyed) return; // the client left while its body was being read
    const job: Job = {
      endpoint,
      request,
      res,
      head: responseHead(endpoint, request.model ?? this.config.alias, Date.now()),
      task: this.#tasks++,
      promptTokens: 0,
      completionTokens: 0,
      text: '',
      gone: false,
      ended: false,
      streaming: false,
    };
    res.on('close', () => {
      if (job.ended) return;
      job.gone = true;
      if (this.#scheduler.withdraw(job)) return;
      if (job.workerId !== undefined) this.#worker?.cancel(job.workerId);
    });
    this.#scheduler.submit(job);
  }

  /** Runs `job` on `slot` (called by the scheduler). The slot is released when the worker reports the end. */
  #start(job: Job, slot: number): void {
    job.slot = slot;
    this.#running.add(job);
    const worker = this.#worker;
    if (worker === undefined) {
      this.#finish(job);
      this.#fail(job, 500, 'server_error', 'the model worker is not running');
      return;
    }
    job.workerId = worker.generate(slot, job.request.input, job.request.params, {
      prompt: (promptTokens) => this.#onPrompt(job, promptTokens),
      token: (text) => this.#onToken(job, text),
      done: (result) => this.#onDone(job, result),
      failed: (status, type, message) => {
        this.#finish(job);
        this.#fail(job, status, type, message);
      },
    });
    // The client may have gone while the job was being handed to the worker.
    if (job.gone) worker.cancel(job.workerId);
  }

  #onPrompt(job: Job, promptTokens: number): void {
    job.promptTokens = promptTokens;
    if (job.gone || job.ended || !job.request.stream) return;
    job.streaming = true;
    job.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    job.res.flushHeaders();
    if (job.endpoint === 'chat') job.res.write(sse(roleChunk(job.head)));
  }

  #onToken(job: Job, text: string): void {
    job.completionTokens++;
    if (job.gone || job.ended || text === '') return;
    if (job.streaming) job.res.write(sse(textChunk(job.endpoint, job.head, text)));
    else job.text += text;
  }

  #onDone(job: Job, result: GenerationResult): void {
    this.#finish(job);
    const s = this.#stats;
    s.promptTokens += job.promptTokens;
    s.promptMs += result.promptMs;
    s.predictedTokens += result.completionTokens;
    s.predictMs += result.predictMs;
    s.decodes += result.decodes;
    s.busySlots += result.busySlots;
    s.maxPromptTokens = Math.max(s.maxPromptTokens, job.promptTokens);
    if (job.gone || job.ended || result.finishReason === 'cancelled') return;
    const outcome: Outcome = {
      promptTokens: job.promptTokens,
      completionTokens: result.completionTokens,
      promptMs: result.promptMs,
      predictMs: result.predictMs,
      finishReason: result.finishReason,
    };
    job.ended = true;
    if (job.streaming) {
      if (result.text !== '') job.res.write(sse(textChunk(job.endpoint, job.head, result.text)));
      job.res.write(sse(finalChunk(job.endpoint, job.head, outcome)));
      if (job.request.includeUsage) job.res.write(sse(usageChunk(job.endpoint, job.head, outcome)));
      job.res.end(sse('[DONE]'));
    } else {
      sendJson(job.res, 200, completeResponse(job.endpoint, job.head, job.text + result.text, outcome));
    }
  }

  /** Frees the job's slot (if it holds one); the next queued job starts on it. */
  #finish(job: Job): void {
    this.#running.delete(job);
    if (job.slot !== undefined && this.#scheduler.holder(job.slot) === job) this.#scheduler.release(job.slot, job);
  }

  /** Ends `job` with an error: a JSON error before the stream started, an SSE error event after. */
  #fail(job: Job, status: number, type: string, message: string): void {
    if (job.gone || job.ended) return;
    job.ended = true;
    if (job.streaming) job.res.end(sse(errorBody(status, type, message)));
    else sendJson(job.res, status, errorBody(status, type, message));
  }
}

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(new BodyTooLarge(`the request body is larger than ${limit} bytes`));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
