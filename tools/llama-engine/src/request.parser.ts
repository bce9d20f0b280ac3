import type { ChatTurn, GenerateInput, GenerateParams } from './worker.protocol';

/** A request body the engine can run. */
export interface ParsedRequest {
  input: GenerateInput;
  params: GenerateParams;
  stream: boolean;
  /** `stream_options.include_usage`: a last chunk with `usage` and no choices. */
  includeUsage: boolean;
  /** The `model` the client asked for, echoed in responses; undefined when absent. */
  model?: string;
}

/** Why a body was refused: HTTP 400 with an OpenAI-shaped error naming `param`. */
export class RequestError extends Error {
  constructor(
    message: string,
    readonly param?: string,
  ) {
    super(message);
    this.name = 'RequestError';
  }
}

/** llama-server's sampling defaults. */
export const SAMPLING_DEFAULTS = Object.freeze({ temperature: 0.8, topP: 0.95, topK: 40, minP: 0.05 });

type Body = Record<string, unknown>;

/** Parses JSON text into an object body; malformed JSON or a non-object is a RequestError. */
export function parseJsonBody(text: string): Body {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new RequestError(`malformed JSON body: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new RequestError('the body must be a JSON object');
  return value as Body;
}

/** `/v1/chat/completions`: `messages` (text content only) plus the shared sampling fields. */
export function parseChatRequest(body: Body): ParsedRequest {
  const raw = body.messages;
  if (raw === undefined) throw new RequestError("'messages' is required", 'messages');
  if (!Array.isArray(raw) || raw.length === 0) throw new RequestError("'messages' must be a non-empty array", 'messages');
  const messages = raw.map((m, i) => parseTurn(m, `messages[${i}]`));
  return { input: { kind: 'chat', messages }, ...parseCommon(body) };
}

/** `/v1/completions`: `prompt` (a string, or an array holding one string) plus the shared sampling fields. */
export function parseCompletionRequest(body: Body): ParsedRequest {
  let prompt = body.prompt;
  if (prompt === undefined) throw new RequestError("'prompt' is required", 'prompt');
  if (Array.isArray(prompt)) {
    if (prompt.length !== 1 || typeof prompt[0] !== 'string') throw new RequestError("'prompt' must be a string or an array of exactly one string", 'prompt');
    prompt = prompt[0];
  }
  if (typeof prompt !== 'string') throw new RequestError("'prompt' must be a string", 'prompt');
  return { input: { kind: 'completion', prompt }, ...parseCommon(body) };
}

function parseTurn(m: unknown, path: string): ChatTurn {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new RequestError(`${path} must be an object`, path);
  const { role, content } = m as Body;
  let mapped: ChatTurn['role'];
  if (role === 'system' || role === 'developer') mapped = 'system';
  else if (role === 'user') mapped = 'user';
  else if (role === 'assistant') mapped = 'assistant';
  else throw new RequestError(`${path}.role must be one of system, developer, user, assistant (got ${JSON.stringify(role)})`, `${path}.role`);
  return { role: mapped, content: parseContent(content, mapped, `${path}.content`) };
}

function parseContent(content: unknown, role: ChatTurn['role'], path: string): string {
  if (typeof content === 'string') return content;
  if ((content === null || content === undefined) && role === 'assistant') return '';
  if (Array.isArray(content)) {
    return content
      .map((part, i) => {
        const p = part as Body | null;
        if (typeof p !== 'object' || p === null || p.type !== 'text' || typeof p.text !== 'string') {
          throw new RequestError(`${path}[${i}] must be a text part ({"type":"text","text":...}); this engine takes text only`, `${path}[${i}]`);
        }
        return p.text;
      })
      .join('\n');
  }
  throw new RequestError(`${path} must be a string or an array of text parts`, path);
}

function parseCommon(body: Body): Omit<ParsedRequest, 'input'> {
  if (body.n !== undefined && body.n !== 1) throw new RequestError('only one completion choice is allowed (n must be 1)', 'n');
  const stream = optionalBoolean(body, 'stream') ?? false;
  const streamOptions = body.stream_options;
  let includeUsage = false;
  if (streamOptions !== undefined && streamOptions !== null) {
    if (typeof streamOptions !== 'object' || Array.isArray(streamOptions)) throw new RequestError("'stream_options' must be an object", 'stream_options');
    includeUsage = optionalBoolean(streamOptions as Body, 'include_usage', 'stream_options.include_usage') ?? false;
  }
  const maxTokens = firstDefined(body, ['max_completion_tokens', 'max_tokens', 'n_predict']);
  let max: number | undefined;
  if (maxTokens !== undefined) {
    const [name, value] = maxTokens;
    if (!Number.isSafeInteger(value) || (value as number) < -1) throw new RequestError(`'${name}' must be an integer >= 0, or -1 for no limit (got ${JSON.stringify(value)})`, name);
    max = value === -1 ? undefined : (value as number);
  }
  const seedValue = body.seed;
  let seed: number | undefined;
  if (seedValue !== undefined && seedValue !== null) {
    if (!Number.isSafeInteger(seedValue)) throw new RequestError(`'seed' must be an integer (got ${JSON.stringify(seedValue)})`, 'seed');
    // llama-server: -1 (or any value outside 32 bits here) means a random seed.
    seed = (seedValue as number) === -1 ? undefined : Number(BigInt.asUintN(32, BigInt(seedValue as number)));
  }
  const model = body.model;
  if (model !== undefined && model !== null && typeof model !== 'string') throw new RequestError("'model' must be a string", 'model');
  return {
    stream,
    includeUsage,
    model: typeof model === 'string' ? model : undefined,
    params: {
      maxTokens: max,
      temperature: optionalNumber(body, 'temperature', 0, Infinity) ?? SAMPLING_DEFAULTS.temperature,
      topP: optionalNumber(body, 'top_p', 0, 1) ?? SAMPLING_DEFAULTS.topP,
      topK: optionalInteger(body, 'top_k', 0) ?? SAMPLING_DEFAULTS.topK,
      minP: optionalNumber(body, 'min_p', 0, 1) ?? SAMPLING_DEFAULTS.minP,
      seed,
      stop: parseStop(body.stop),
    },
  };
}

function firstDefined(body: Body, names: string[]): [string, unknown] | undefined {
  for (const name of names) if (body[name] !== undefined && body[name] !== null) return [name, body[name]];
  return undefined;
}

function optionalBoolean(body: Body, name: string, path = name): boolean | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new RequestError(`'${path}' must be a boolean (got ${JSON.stringify(v)})`, path);
  return v;
}

function optionalNumber(body: Body, name: string, min: number, max: number): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw new RequestError(`'${name}' must be a number in [${min}, ${max === Infinity ? '∞' : max}] (got ${JSON.stringify(v)})`, name);
  }
  return v;
}

function optionalInteger(body: Body, name: string, min: number): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (!Number.isSafeInteger(v) || (v as number) < min) throw new RequestError(`'${name}' must be an integer >= ${min} (got ${JSON.stringify(v)})`, name);
  return v as number;
}

function parseStop(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || list.some((s) => typeof s !== 'string')) throw new RequestError("'stop' must be a string or an array of strings", 'stop');
  return (list as string[]).filter((s) => s !== '');
}
