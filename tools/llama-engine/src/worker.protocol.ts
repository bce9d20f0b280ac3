// IPC messages between the HTTP process and the model worker (model.worker.mjs, a plain ES
// module so that node-llama-cpp is imported as real ESM). Keep both sides in step: the worker
// documents the same shapes in JSDoc.

/** Sampling and stopping for one generation, already validated. */
export interface GenerateParams {
  /** Tokens to generate at most; undefined: until end of generation or the slot's context is full. */
  maxTokens?: number;
  /** 0: greedy. */
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  /** undefined: a random seed per request. */
  seed?: number;
  /** Text that ends the generation (not included in the output). */
  stop: string[];
}

/** One chat turn; `system` covers OpenAI `system` and `developer`. */
export interface ChatTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** What to generate from: chat turns (formatted by the worker) or a raw prompt. */
export type GenerateInput = { kind: 'chat'; messages: ChatTurn[] } | { kind: 'completion'; prompt: string };

/** Parent → worker. */
export type ToWorker =
  /** Step 1: load the weights (after `debugLoadDelayMs`); answered by `model-loaded` or `load-failed`. */
  | { type: 'load'; modelPath: string; threads: number; debugLoadDelayMs: number }
  /** Step 2: one context with `parallel` sequences of `slotContextSize` tokens; answered by `ready` or `load-failed`. */
  | { type: 'create-context'; slotContextSize: number; parallel: number; threads: number }
  | { type: 'generate'; id: number; slot: number; input: GenerateInput; params: GenerateParams }
  | { type: 'cancel'; id: number };

/** Why a generation ended. `cancelled`: the client went away. */
export type FinishReason = 'stop' | 'length' | 'cancelled';

/** Worker → parent. */
export type FromWorker =
  | { type: 'model-loaded'; trainContextSize: number; embeddingSize?: number; parameters?: number; sizeBytes: number }
  /** The context exists; `slotContextSize` is what llama.cpp actually allocated per slot (it pads). */
  | { type: 'ready'; slotContextSize: number }
  | { type: 'load-failed'; message: string }
  /** The prompt is tokenized and fits; evaluation starts. */
  | { type: 'prompt'; id: number; promptTokens: number }
  /** One generated token; `text` may be empty while a multi-byte character or a possible stop string is held back. */
  | { type: 'token'; id: number; text: string }
  | {
      type: 'done';
      id: number;
      /** Text held back until the end, flushed now (may be empty). */
      text: string;
      finishReason: FinishReason;
      completionTokens: number;
      promptMs: number;
      predictMs: number;
      /** Decode steps this generation took, and the sum over them of slots busy at that step. */
      decodes: number;
      busySlots: number;
    }
  | { type: 'failed'; id: number; status: number; errorType: string; message: string };
