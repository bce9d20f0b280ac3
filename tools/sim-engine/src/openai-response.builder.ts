import type { EngineKind } from '@llmgw/domain';

/** OpenAI `usage`. `prompt_tokens_details` is null unless the prefix cache is on (as vLLM). */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number } | null;
}

export type FinishReason = 'stop' | 'length';

/** The envelope every chunk and body of one response shares. */
export interface ResponseHead {
  id: string;
  created: number;
  model: string;
}

/** One finished choice of a non-streamed response. */
export interface ChoiceResult {
  index: number;
  text: string;
  finishReason: FinishReason;
}

export function chatRoleChunk(h: ResponseHead, index: number): object {
  return chatChunk(h, [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
}

export function chatContentChunk(h: ResponseHead, index: number, content: string): object {
  return chatChunk(h, [{ index, delta: { content }, logprobs: null, finish_reason: null }]);
}

/** The chunk closing one choice: empty delta plus finish_reason, as OpenAI sends it. */
export function chatFinishChunk(h: ResponseHead, index: number, reason: FinishReason, extra: object = {}): object {
  return { ...chatChunk(h, [{ index, delta: {}, logprobs: null, finish_reason: reason, stop_reason: null }]), ...extra };
}

/** The trailing usage chunk sent when `stream_options.include_usage` is true: no choices. */
export function usageChunk(h: ResponseHead, kind: 'chat' | 'completion', usage: Usage): object {
  return { ...(kind === 'chat' ? chatChunk(h, []) : completionChunk(h, [])), usage };
}

function chatChunk(h: ResponseHead, choices: object[]): object {
  return { id: h.id, object: 'chat.completion.chunk', created: h.created, model: h.model, choices };
}

export function completionTextChunk(h: ResponseHead, index: number, text: string): object {
  return completionChunk(h, [{ index, text, logprobs: null, finish_reason: null, stop_reason: null }]);
}

export function completionFinishChunk(h: ResponseHead, index: number, reason: FinishReason, extra: object = {}): object {
  return { ...completionChunk(h, [{ index, text: '', logprobs: null, finish_reason: reason, stop_reason: null }]), ...extra };
}

function completionChunk(h: ResponseHead, choices: object[]): object {
  return { id: h.id, object: 'text_completion', created: h.created, model: h.model, choices };
}

export function chatCompletionBody(h: ResponseHead, choices: ChoiceResult[], usage: Usage, extra: object = {}): object {
  return {
    id: h.id,
    object: 'chat.completion',
    created: h.created,
    model: h.model,
    choices: choices.map((c) => ({
      index: c.index,
      message: { role: 'assistant', content: c.text, refusal: null, tool_calls: [] },
      logprobs: null,
      finish_reason: c.finishReason,
      stop_reason: null,
    })),
    usage,
    ...extra,
  };
}

export function completionBody(h: ResponseHead, choices: ChoiceResult[], usage: Usage, extra: object = {}): object {
  return {
    id: h.id,
    object: 'text_completion',
    created: h.created,
    model: h.model,
    choices: choices.map((c) => ({ index: c.index, text: c.text, logprobs: null, finish_reason: c.finishReason, stop_reason: null })),
    usage,
    ...extra,
  };
}

export function embeddingBody(h: ResponseHead, vectors: (number[] | string)[], promptTokens: number): object {
  return {
    id: h.id,
    object: 'list',
    created: h.created,
    model: h.model,
    data: vectors.map((embedding, index) => ({ index, object: 'embedding', embedding })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0, prompt_tokens_details: null },
  };
}

/** One SSE event carrying JSON. */
export function sse(payload: object): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

export const SSE_DONE = 'data: [DONE]\n\n';

/** OpenAI's error `type` per HTTP status, in each engine's own vocabulary. */
export function errorType(engine: EngineKind, status: number): string {
  if (engine === 'llamacpp') {
    const llama: Record<number, string> = {
      400: 'invalid_request_error',
      401: 'authentication_error',
      404: 'not_found_error',
      405: 'invalid_request_error',
      413: 'invalid_request_error',
      501: 'not_supported_error',
      503: 'unavailable_error',
    };
    return llama[status] ?? 'server_error';
  }
  const vllm: Record<number, string> = {
    400: 'BadRequestError',
    401: 'Unauthorized',
    404: 'NotFoundError',
    405: 'MethodNotAllowed',
    413: 'BadRequestError',
    503: 'ServiceUnavailableError',
  };
  return vllm[status] ?? 'InternalServerError';
}

/** The OpenAI-shaped error body `{"error":{"message","type","param","code"}}`; `code` is the HTTP status, as vLLM and llama-server send it. */
export function errorBody(engine: EngineKind, status: number, message: string, param?: string): object {
  return { error: { message, type: errorType(engine, status), param: param ?? null, code: status } };
}
