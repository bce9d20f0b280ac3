import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { FinishReason, FromWorker, GenerateInput, GenerateParams, ToWorker } from './worker.protocol';

/** What the model reports once loaded. Sizes in tokens and bytes. */
export interface ModelInfo {
  trainContextSize: number;
  embeddingSize?: number;
  parameters?: number;
  sizeBytes: number;
}

/** Callbacks for one generation; exactly one of `done`/`failed` is called, last. */
export interface GenerationHandlers {
  prompt(promptTokens: number): void;
  token(text: string): void;
  done(result: GenerationResult): void;
  failed(status: number, errorType: string, message: string): void;
}

/** How a generation ended, with its counts and timings (milliseconds). */
export interface GenerationResult {
  text: string;
  finishReason: FinishReason;
  completionTokens: number;
  promptMs: number;
  predictMs: number;
  decodes: number;
  busySlots: number;
}

/** Lifecycle events of the worker process. */
export interface WorkerEvents {
  modelLoaded(info: ModelInfo): void;
  ready(slotContextSize: number): void;
  /** Loading failed with an error the worker could report (bad file, out of memory, ...). */
  loadFailed(message: string): void;
  /** The worker process is gone (a native abort, a kill, or after a load failure). */
  exited(code: number | null, signal: NodeJS.Signals | null): void;
}

const WORKER_FILE = join(__dirname, 'model.worker.mjs');

/**
 * The model worker as seen from the HTTP process: a forked Node process running
 * model.worker.mjs, driven over IPC. Generations are addressed by an id this class assigns;
 * handlers of generations in flight get `failed` (500) if the worker dies.
 */
export class ModelWorkerClient {
  readonly #child: ChildProcess;
  readonly #handlers = new Map<number, GenerationHandlers>();
  #nextId = 1;
  #exited = false;

  constructor(private readonly events: WorkerEvents) {
    // execArgv: [] keeps debugger/loader flags of this process away from the worker; stdout and
    // stderr are shared so llama.cpp's own error lines land in the engine log.
    this.#child = fork(WORKER_FILE, [], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' });
    this.#child.on('message', (message: FromWorker) => this.#onMessage(message));
    this.#child.on('error', (error) => process.stderr.write(`llama-engine: model worker: ${error.message}\n`));
    this.#child.on('exit', (code, signal) => {
      this.#exited = true;
      for (const [id, handlers] of this.#handlers) {
        this.#handlers.delete(id);
        handlers.failed(500, 'server_error', `the model worker exited (${signal !== null ? `signal ${signal}` : `code ${code}`}) during generation`);
      }
      this.events.exited(code, signal);
    });
  }

  /** Process id of the worker. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** True once the worker process has exited. */
  get exited(): boolean {
    return this.#exited;
  }

  load(modelPath: string, threads: number, debugLoadDelayMs: number): void {
    this.#send({ type: 'load', modelPath, threads, debugLoadDelayMs });
  }

  createContext(slotContextSize: number, parallel: number, threads: number): void {
    this.#send({ type: 'create-context', slotContextSize, parallel, threads });
  }

  /** Starts a generation on `slot` (which the caller holds until `done`/`failed`); returns its id for `cancel`. */
  generate(slot: number, input: GenerateInput, params: GenerateParams, handlers: GenerationHandlers): number {
    const id = this.#nextId++;
    if (this.#exited) {
      handlers.failed(500, 'server_error', 'the model worker is not running');
      return id;
    }
    this.#handlers.set(id, handlers);
    this.#send({ type: 'generate', id, slot, input, params });
    return id;
  }

  /** Asks the worker to stop generation `id`; it still ends with `done` (finishReason `cancelled`). */
  cancel(id: number): void {
    if (this.#handlers.has(id)) this.#send({ type: 'cancel', id });
  }

  /**
   * Ends the worker: closes the IPC channel (the worker exits on it; it ignores SIGTERM/SIGINT
   * so that a signal to the whole process group reaches only this side), then SIGKILL after
   * `graceMs`. Resolves once it has exited.
   */
  stop(graceMs = 2_000): Promise<void> {
    if (this.#exited) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
      this.#child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      if (this.#child.connected) this.#child.disconnect();
      else this.#child.kill('SIGKILL');
    });
  }

  #send(message: ToWorker): void {
    if (this.#exited || !this.#child.connected) return;
    this.#child.send(message);
  }

  #onMessage(message: FromWorker): void {
    switch (message.type) {
      case 'model-loaded':
        this.events.modelLoaded({
          trainContextSize: message.trainContextSize,
          embeddingSize: message.embeddingSize,
          parameters: message.parameters,
          sizeBytes: message.sizeBytes,
        });
        return;
      case 'ready':
        this.events.ready(message.slotContextSize);
        return;
      case 'load-failed':
        this.events.loadFailed(message.message);
        return;
      case 'prompt':
        this.#handlers.get(message.id)?.prompt(message.promptTokens);
        return;
      case 'token':
        this.#handlers.get(message.id)?.token(message.text);
        return;
      case 'done': {
        const handlers = this.#handlers.get(message.id);
        this.#handlers.delete(message.id);
        handlers?.done({
          text: message.text,
          finishReason: message.finishReason,
          completionTokens: message.completionTokens,
          promptMs: message.promptMs,
          predictMs: message.predictMs,
          decodes: message.decodes,
          busySlots: message.busySlots,
        });
        return;
      }
      case 'failed': {
        const handlers = this.#handlers.get(message.id);
        this.#handlers.delete(message.id);
        handlers?.failed(message.status, message.errorType, message.message);
        return;
      }
    }
  }
}
