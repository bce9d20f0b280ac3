import { renderChat, tokenize, type ChatMessage } from './prompt.tokenizer';

/** A request body the simulator refuses: HTTP status, message, and the offending field if one. */
export interface RequestProblem {
  status: number;
  message: string;
  param?: string;
}

/** One prompt as token ids (chat: the rendered conversation). */
export interface PromptInput {
  tokens: number[];
}

/** A validated /v1/chat/completions or /v1/completions request. */
export interface GenerationRequest {
  kind: 'chat' | 'completion';
  model: string;
  prompts: PromptInput[];
  /** Choices per prompt. */
  n: number;
  /** Completion token cap; undefined: up to the natural length / context. */
  maxTokens?: number;
  stream: boolean;
  includeUsage: boolean;
  seed?: number;
  ignoreEos: boolean;
}

/** A validated /v1/embeddings request. */
export interface EmbeddingRequest {
  kind: 'embedding';
  model: string;
  inputs: PromptInput[];
  encodingFormat: 'float' | 'base64';
  dimensions?: number;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; problem: RequestProblem };

type Body = Record<string, unknown>;

/** Most sequences one request may start (prompts x n). */
const MAX_CHOICES = 1024;

const bad = (message: string, param?: string): { ok: false; problem: RequestProblem } => ({ ok: false, problem: { status: 400, message, param } });

/** Parses raw bytes as a JSON object; malformed JSON or a non-object is a 400. */
export function parseJsonBody(raw: string): Parsed<Body> {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return bad(`Invalid JSON in request body: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return bad('Request body must be a JSON object');
  return { ok: true, value: value as Body };
}

/** Validates a chat completions body (types of the fields the simulator reads; others pass through). */
export function parseChatRequest(body: Body): Parsed<GenerationRequest> {
  const common = parseCommon(body);
  if (!common.ok) return common;
  const messages = body.messages;
  if (messages === undefined) return bad('Field required: messages', 'messages');
  if (!Array.isArray(messages) || messages.length === 0) return bad('messages must be a non-empty array', 'messages');
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as unknown;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return bad(`messages[${i}] must be an object`, `messages[${i}]`);
    const role = (m as Body).role;
    if (typeof role !== 'string' || role === '') return bad(`messages[${i}].role must be a non-empty string`, `messages[${i}].role`);
    const content = (m as Body).content;
    if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
      return bad(`messages[${i}].content must be a string, an array of parts or null`, `messages[${i}].content`);
    }
  }
  const maxTokens = firstDefined(body, ['max_completion_tokens', 'max_tokens']);
  if (!maxTokens.ok) return maxTokens;
  const tokens = tokenize(renderChat(messages as ChatMessage[], body.tools));
  return { ok: true, value: { ...common.value, kind: 'chat', prompts: [{ tokens }], maxTokens: maxTokens.value } };
}

/** Validates a (legacy) completions body: `prompt` is a string, strings, token ids or lists of token ids. */
export function parseCompletionRequest(body: Body): Parsed<GenerationRequest> {
  const common = parseCommon(body);
  if (!common.ok) return common;
  if (body.prompt === undefined) return bad('Field required: prompt', 'prompt');
  const prompts = parsePromptLike(body.prompt, 'prompt');
  if (!prompts.ok) return prompts;
  const maxTokens = optionalPositiveInt(body, 'max_tokens');
  if (!maxTokens.ok) return maxTokens;
  if (prompts.value.length * common.value.n > MAX_CHOICES) {
    return bad(`prompts x n must be at most ${MAX_CHOICES}, got ${prompts.value.length} x ${common.value.n}`, 'prompt');
  }
  return { ok: true, value: { ...common.value, kind: 'completion', prompts: prompts.value, maxTokens: maxTokens.value } };
}

/** Validates an embeddings body. */
export function parseEmbeddingRequest(body: Body, maxDimensions: number): Parsed<EmbeddingRequest> {
  const model = parseModel(body);
  if (!model.ok) return model;
  if (body.input === undefined) return bad('Field required: input', 'input');
  const inputs = parsePromptLike(body.input, 'input');
  if (!inputs.ok) return inputs;
  const format = body.encoding_format ?? 'float';
  if (format !== 'float' && format !== 'base64') return bad(`encoding_format must be 'float' or 'base64', got ${JSON.stringify(format)}`, 'encoding_format');
  if (inputs.value.length > MAX_CHOICES) return bad(`input may hold at most ${MAX_CHOICES} items, got ${inputs.value.length}`, 'input');
  const dims = optionalPositiveInt(body, 'dimensions');
  if (!dims.ok) return dims;
  if (dims.value !== undefined && dims.value > maxDimensions) {
    return bad(`dimensions must be at most ${maxDimensions} for this model, got ${dims.value}`, 'dimensions');
  }
  return { ok: true, value: { kind: 'embedding', model: model.value, inputs: inputs.value, encodingFormat: format, dimensions: dims.value } };
}

function parseModel(body: Body): Parsed<string> {
  if (body.model === undefined || body.model === null) return bad('Field required: model', 'model');
  if (typeof body.model !== 'string' || body.model === '') return bad('model must be a non-empty string', 'model');
  return { ok: true, value: body.model };
}

function parseCommon(body: Body): Parsed<Omit<GenerationRequest, 'kind' | 'prompts' | 'maxTokens'>> {
  const model = parseModel(body);
  if (!model.ok) return model;
  const stream = body.stream ?? false;
  if (typeof stream !== 'boolean') return bad('stream must be a boolean', 'stream');
  const so = body.stream_options;
  let includeUsage = false;
  if (so !== undefined && so !== null) {
    if (!stream) return bad('Stream options can only be defined when `stream=True`.', 'stream_options');
    if (typeof so !== 'object' || Array.isArray(so)) return bad('stream_options must be an object', 'stream_options');
    const iu = (so as Body).include_usage;
    if (iu !== undefined && iu !== null && typeof iu !== 'boolean') return bad('stream_options.include_usage must be a boolean', 'stream_options.include_usage');
    includeUsage = iu === true;
  }
  const n = optionalPositiveInt(body, 'n');
  if (!n.ok) return n;
  if ((n.value ?? 1) > 128) return bad(`n must be at most 128, got ${n.value}`, 'n');
  const seed = body.seed;
  if (seed !== undefined && seed !== null && (typeof seed !== 'number' || !Number.isInteger(seed))) return bad('seed must be an integer', 'seed');
  const ignoreEos = body.ignore_eos ?? false;
  if (typeof ignoreEos !== 'boolean') return bad('ignore_eos must be a boolean', 'ignore_eos');
  return {
    ok: true,
    value: { model: model.value, n: n.value ?? 1, stream, includeUsage, seed: typeof seed === 'number' ? seed : undefined, ignoreEos },
  };
}

function optionalPositiveInt(body: Body, key: string): Parsed<number | undefined> {
  const v = body[key];
  if (v === undefined || v === null) return { ok: true, value: undefined };
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) return bad(`${key} must be an integer >= 1, got ${JSON.stringify(v)}`, key);
  return { ok: true, value: v };
}

function firstDefined(body: Body, keys: string[]): Parsed<number | undefined> {
  for (const key of keys) {
    const r = optionalPositiveInt(body, key);
    if (!r.ok || r.value !== undefined) return r;
  }
  return { ok: true, value: undefined };
}

function isTokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number' && Number.isInteger(t) && t >= 0);
}

/** string | string[] | int[] | int[][], each non-empty. */
function parsePromptLike(v: unknown, param: string): Parsed<PromptInput[]> {
  const fromText = (text: string, path: string): Parsed<PromptInput> => {
    const tokens = tokenize(text);
    if (tokens.length === 0) return bad(`${path} must not be empty`, path);
    return { ok: true, value: { tokens } };
  };
  if (typeof v === 'string') {
    const one = fromText(v, param);
    return one.ok ? { ok: true, value: [one.value] } : one;
  }
  if (isTokenIds(v)) return { ok: true, value: [{ tokens: v.map((t) => t >>> 0) }] };
  if (!Array.isArray(v) || v.length === 0) return bad(`${param} must be a non-empty string, array of strings, or array of token ids`, param);
  const out: PromptInput[] = [];
  for (let i = 0; i < v.length; i++) {
    const item = v[i] as unknown;
    if (typeof item === 'string') {
      const one = fromText(item, `${param}[${i}]`);
      if (!one.ok) return one;
      out.push(one.value);
    } else if (isTokenIds(item)) {
      out.push({ tokens: item.map((t) => t >>> 0) });
    } else {
      return bad(`${param}[${i}] must be a non-empty string or array of token ids`, `${param}[${i}]`);
    }
  }
  return { ok: true, value: out };
}
