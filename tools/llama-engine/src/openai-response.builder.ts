import { randomBytes } from 'node:crypto';
import type { FinishReason } from './worker.protocol';

/** Which OpenAI endpoint a response belongs to. */
export type Endpoint = 'chat' | 'completion';

/** Counts and timings of one finished generation (milliseconds). */
export interface Outcome {
  promptTokens: number;
  completionTokens: number;
  promptMs: number;
  predictMs: number;
  finishReason: Exclude<FinishReason, 'cancelled'>;
}

/** Fields every response and chunk of one request shares. */
export interface ResponseHead {
  id: string;
  created: number;
  model: string;
}

/** A fresh head: `chatcmpl-…`/`cmpl-…` id and `created` in Unix seconds. */
export function responseHead(endpoint: Endpoint, model: string, nowMs: number): ResponseHead {
  return { id: `${endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`, created: Math.floor(nowMs / 1000), model };
}

/** llama-server's error body: `{"error":{"code","message","type"}}`, plus `param` when one field is at fault. */
export function errorBody(status: number, type: string, message: string, param?: string): { error: Record<string, unknown> } {
  return { error: { code: status, message, type, ...(param !== undefined ? { param } : {}) } };
}

function usage(o: Outcome): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return { prompt_tokens: o.promptTokens, completion_tokens: o.completionTokens, total_tokens: o.promptTokens + o.completionTokens };
}

/** llama-server's `timings` object (milliseconds, tokens per second). */
function timings(o: Outcome): Record<string, number> {
  const rate = (n: number, ms: number): number => (ms > 0 ? (1e3 * n) / ms : 0);
  return {
    prompt_n: o.promptTokens,
    prompt_ms: o.promptMs,
    prompt_per_second: rate(o.promptTokens, o.promptMs),
    predicted_n: o.completionTokens,
    predicted_ms: o.predictMs,
    predicted_per_second: rate(o.completionTokens, o.predictMs),
  };
}

/** The whole (non-streamed) response. */
export function completeResponse(endpoint: Endpoint, head: ResponseHead, text: string, o: Outcome): Record<string, unknown> {
  const choice =
    endpoint === 'chat'
      ? { index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: o.finishReason }
      : { index: 0, text, logprobs: null, finish_reason: o.finishReason };
  return {
    id: head.id,
    object: endpoint === 'chat' ? 'chat.completion' : 'text_completion',
    created: head.created,
    model: head.model,
    choices: [choice],
    usage: usage(o),
    timings: timings(o),
  };
}

function chunk(endpoint: Endpoint, head: ResponseHead, choice: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: head.id,
    object: endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: head.created,
    model: head.model,
    choices: choice === undefined ? [] : [choice],
    ...extra,
  };
}

/** The first chat chunk, announcing the assistant role (completions have none). */
export function roleChunk(head: ResponseHead): Record<string, unknown> {
  return chunk('chat', head, { index: 0, delta: { role: 'assistant', content: null }, logprobs: null, finish_reason: null });
}

/** A chunk carrying generated text. */
export function textChunk(endpoint: Endpoint, head: ResponseHead, text: string): Record<string, unknown> {
  return chunk(endpoint, head, endpoint === 'chat' ? { index: 0, delta: { content: text }, logprobs: null, finish_reason: null } : { index: 0, text, logprobs: null, finish_reason: null });
}

/** The chunk with `finish_reason` (and llama-server's `timings`). */
export function finalChunk(endpoint: Endpoint, head: ResponseHead, o: Outcome): Record<string, unknown> {
  const choice = endpoint === 'chat' ? { index: 0, delta: {}, logprobs: null, finish_reason: o.finishReason } : { index: 0, text: '', logprobs: null, finish_reason: o.finishReason };
  return chunk(endpoint, head, choice, { timings: timings(o) });
}

/** `stream_options.include_usage`: no choices, only `usage`. */
export function usageChunk(endpoint: Endpoint, head: ResponseHead, o: Outcome): Record<string, unknown> {
  return chunk(endpoint, head, undefined, { usage: usage(o) });
}

/** One SSE event. JSON.stringify escapes lone surrogates, so any generated text encodes. */
export function sse(data: unknown): string {
  return `data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}
