// The model worker: runs llama.cpp (node-llama-cpp 3.21.1, CPU only) in a child process of the
// HTTP server, so that a native abort on a malformed GGUF kills this process and not the server.
// Plain ES module on purpose: node-llama-cpp is ESM-only and the repository's TypeScript is
// compiled to CommonJS. Talks to its parent over IPC only; the message shapes are declared in
// worker.protocol.ts (ToWorker / FromWorker). Exits when the parent goes away.
import { ChatMLChatWrapper, getLlama, resolveChatWrapper } from 'node-llama-cpp';

const REPLACEMENT = '\uFFFD';
/** Longest UTF-8 sequence: a character split over byte tokens is complete after at most 4. */
const MAX_CHAR_TOKENS = 4;
/** Tokens of left context handed to the detokenizer, so pieces join with the right spacing. */
const LAST_TOKENS = 8;

/** @type {import('node-llama-cpp').Llama | undefined} */
let llama;
/** @type {import('node-llama-cpp').LlamaModel | undefined} */
let model;
/** @type {import('node-llama-cpp').LlamaContextSequence[]} */
let sequences = [];
/** @type {import('node-llama-cpp').ChatWrapper | undefined} */
let chatWrapper;
/** Generations in progress, by request id. @type {Map<number, {cancelled: boolean}>} */
const running = new Map();

function send(message) {
  if (process.connected) process.send(message);
}

function errorMessage(error) {
  return error instanceof Error ? error.message : String(error);
}

// The parent ends this process by closing the IPC channel (or SIGKILL). Signals sent to the
// whole process group (Ctrl-C, a supervisor's SIGTERM) are the parent's to handle: dying first
// would look like a crash to it.
process.on('disconnect', () => process.exit(0));
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);

process.on('message', (message) => {
  switch (message?.type) {
    case 'load':
      void load(message);
      break;
    case 'create-context':
      void createContext(message);
      break;
    case 'generate':
      void generate(message);
      break;
    case 'cancel': {
      const job = running.get(message.id);
      if (job) job.cancelled = true;
      break;
    }
    default:
      process.stderr.write(`llama-engine worker: ignoring unknown message ${JSON.stringify(message?.type)}\n`);
  }
});

async function load({ modelPath, threads, debugLoadDelayMs }) {
  try {
    if (debugLoadDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, debugLoadDelayMs));
    llama = await getLlama({ gpu: false, maxThreads: threads, build: 'never', logLevel: 'error' });
    model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    // A model with its own template gets the wrapper node-llama-cpp resolves for it; one without
    // (like the generated tiny model) gets ChatML, which is llama-server's fallback too.
    const template = model.fileInfo.metadata?.tokenizer?.chat_template;
    chatWrapper = typeof template === 'string' && template !== '' ? resolveChatWrapper(model) : new ChatMLChatWrapper();
    send({
      type: 'model-loaded',
      trainContextSize: model.trainContextSize,
      embeddingSize: model.fileInsights.embeddingVectorSize,
      parameters: model.fileInsights.totalParameters,
      sizeBytes: model.size,
    });
  } catch (error) {
    send({ type: 'load-failed', message: errorMessage(error) });
    setImmediate(() => process.exit(1));
  }
}

async function createContext({ slotContextSize, parallel, threads }) {
  try {
    const context = await model.createContext({ contextSize: slotContextSize, sequences: parallel, threads });
    sequences = Array.from({ length: parallel }, () => context.getSequence());
    send({ type: 'ready', slotContextSize: context.contextSize });
  } catch (error) {
    send({ type: 'load-failed', message: `creating a context of ${parallel} x ${slotContextSize} tokens failed: ${errorMessage(error)}` });
    setImmediate(() => process.exit(1));
  }
}

/** Chat turns → tokens and the wrapper's text stop triggers (e.g. ChatML's `<|im_end|>`). */
function chatPrompt(messages) {
  const history = [];
  for (const m of messages) {
    if (m.role === 'system') history.push({ type: 'system', text: m.content });
    else if (m.role === 'user') history.push({ type: 'user', text: m.content });
    else history.push({ type: 'model', response: [m.content] });
  }
  history.push({ type: 'model', response: [] });
  const state = chatWrapper.generateContextState({ chatHistory: history });
  const stops = [];
  for (const trigger of state.stopGenerationTriggers ?? []) {
    const json = trigger.toJSON();
    const parts = Array.isArray(json) ? json : [json];
    // Special tokens (EOS, EOT) end the generation anyway; only text triggers need matching.
    if (parts.every((p) => typeof p === 'string' || p.type === 'specialTokensText')) {
      const text = parts.map((p) => (typeof p === 'string' ? p : p.value)).join('');
      if (text !== '' && !stops.includes(text)) stops.push(text);
    }
  }
  return { tokens: state.contextText.tokenize(model.tokenizer), stops };
}

function completionPrompt(prompt) {
  const bos = model.tokens.shouldPrependBosToken && model.tokens.bos != null ? [model.tokens.bos] : [];
  return { tokens: [...bos, ...model.tokenize(prompt)], stops: [] };
}

/**
 * Turns generated tokens into text pieces that are always whole characters and never show a
 * stop string. A piece ending in U+FFFD is held back (up to 4 tokens) until the character is
 * complete; text that could be the start of a stop string is held back until it cannot.
 * Invalid bytes the model emits come out as U+FFFD, so the output is always valid text.
 */
class TextStream {
  constructor(stops) {
    this.stops = stops.filter((s) => s !== '');
    this.pending = [];
    this.last = [];
    this.held = '';
  }

  /** @returns {{ text: string, stopped: boolean }} */
  push(token) {
    this.pending.push(token);
    const piece = model.detokenize(this.pending, false, this.last);
    if (piece.endsWith(REPLACEMENT) && this.pending.length < MAX_CHAR_TOKENS) return { text: '', stopped: false };
    this.last = [...this.last, ...this.pending].slice(-LAST_TOKENS);
    this.pending = [];
    const text = this.held + piece;
    this.held = '';
    let cut = -1;
    for (const stop of this.stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) return { text: text.slice(0, cut), stopped: true };
    const keep = this.#possibleStopStart(text);
    this.held = text.slice(keep);
    return { text: text.slice(0, keep), stopped: false };
  }

  /** Whatever is still held back, once the generation has ended for another reason. */
  flush() {
    const rest = this.held + (this.pending.length > 0 ? model.detokenize(this.pending, false, this.last) : '');
    this.held = '';
    this.pending = [];
    return rest;
  }

  /** Index where the longest suffix of `text` that is a proper prefix of a stop string begins (text.length if none). */
  #possibleStopStart(text) {
    let start = text.length;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > 0; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          start = Math.min(start, text.length - n);
          break;
        }
      }
    }
    return start;
  }
}

async function generate({ id, slot, input, params }) {
  const job = { cancelled: false };
  running.set(id, job);
  try {
    const sequence = sequences[slot];
    await sequence.clearHistory();
    const { tokens, stops } = input.kind === 'chat' ? chatPrompt(input.messages) : completionPrompt(input.prompt);
    if (tokens.length === 0) {
      send({ type: 'failed', id, status: 400, errorType: 'invalid_request_error', message: 'the prompt is empty' });
      return;
    }
    if (tokens.length >= sequence.contextSize) {
      send({
        type: 'failed',
        id,
        status: 400,
        errorType: 'exceed_context_size_error',
        message: `the request exceeds the available context size: ${tokens.length} prompt tokens, ${sequence.contextSize} per slot (raise -c or lower -np)`,
      });
      return;
    }
    send({ type: 'prompt', id, promptTokens: tokens.length });
    const stream = new TextStream([...params.stop, ...(input.kind === 'chat' ? stops : [])]);
    const started = performance.now();
    let firstAt;
    let produced = 0;
    let busySlots = 0;
    let finishReason = 'stop';
    if (params.maxTokens === 0) finishReason = 'length';
    else {
      const evaluation = sequence.evaluate(tokens, {
        temperature: params.temperature,
        topK: params.topK,
        topP: params.topP,
        minP: params.minP,
        seed: params.seed ?? Math.floor(Math.random() * 0xffffffff),
        yieldEogToken: false,
      });
      for await (const token of evaluation) {
        firstAt ??= performance.now();
        produced++;
        busySlots += running.size;
        const { text, stopped } = stream.push(token);
        if (job.cancelled) {
          finishReason = 'cancelled';
          break;
        }
        send({ type: 'token', id, text });
        if (stopped) break;
        if (params.maxTokens !== undefined && produced >= params.maxTokens) {
          finishReason = 'length';
          break;
        }
        // The next step would evaluate past the slot's context: stop like llama-server does.
        if (sequence.nextTokenIndex >= sequence.contextSize - 1) {
          finishReason = 'length';
          break;
        }
      }
    }
    const ended = performance.now();
    send({
      type: 'done',
      id,
      text: finishReason === 'cancelled' ? '' : stream.flush(),
      finishReason,
      completionTokens: produced,
      promptMs: (firstAt ?? ended) - started,
      predictMs: firstAt === undefined ? 0 : ended - firstAt,
      decodes: produced,
      busySlots,
    });
  } catch (error) {
    send({ type: 'failed', id, status: 500, errorType: 'server_error', message: `generation failed: ${errorMessage(error)}` });
  } finally {
    running.delete(id);
  }
}
