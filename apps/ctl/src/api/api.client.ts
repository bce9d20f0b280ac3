import type { Problem } from '@llmgw/domain';

/** Which server a request went to, for messages. */
export type ServerName = 'controller' | 'catalog';

/** An answer the server gave, or the reason there was none; printed as `llmgw: <message>`, exit 1. */
export class ApiError extends Error {
  constructor(
    message: string,
    /** HTTP status; absent when the server could not be reached. */
    readonly status?: number,
    /** The problem+json `problems`, when the server listed any. */
    readonly problems: readonly Problem[] = [],
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** A successful answer: status, headers and the parsed JSON body. */
export interface ApiAnswer<T> {
  status: number;
  headers: Headers;
  body: T;
}

/** Default time a request may take, milliseconds. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;

/**
 * JSON over HTTP to one llmgw server, with the bearer token. A 2xx answer is parsed; anything
 * else becomes an {@link ApiError} carrying the server's problem+json detail and problems; a
 * server that cannot be reached or does not answer in time says so with its URL.
 */
export class ApiClient {
  constructor(
    readonly server: ServerName,
    readonly baseUrl: string,
    private readonly token: string | undefined,
    private readonly timeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
  ) {}

  async get<T>(path: string): Promise<T> {
    return (await this.request<T>('GET', path)).body;
  }

  async request<T>(method: string, path: string, init: { body?: unknown; headers?: Record<string, string> } = {}): Promise<ApiAnswer<T>> {
    const url = `${this.baseUrl}${path}`;
    const headers: Record<string, string> = { accept: 'application/json, application/problem+json', ...init.headers };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(this.timeoutMs) });
      text = await res.text();
    } catch (error) {
      const e = error as Error & { cause?: { code?: string; message?: string } };
      if (e.name === 'TimeoutError' || e.name === 'AbortError') throw new ApiError(`${this.server} at ${this.baseUrl} did not answer ${method} ${path} within ${this.timeoutMs} ms`);
      const cause = e.cause?.code ?? e.cause?.message;
      throw new ApiError(`cannot reach the ${this.server} at ${this.baseUrl}${cause ? ` (${cause})` : ''}: ${hint(this.server)}`);
    }
    const parsed = parseJson(text);
    if (res.status >= 200 && res.status < 300) {
      if (parsed === undefined && text.trim() !== '') throw new ApiError(`${this.server} answered ${method} ${path} with something that is not JSON`, res.status);
      return { status: res.status, headers: res.headers, body: parsed as T };
    }
    throw errorOf(this.server, method, path, res.status, parsed);
  }
}

function errorOf(server: ServerName, method: string, path: string, status: number, body: unknown): ApiError {
  const problem = (typeof body === 'object' && body !== null ? body : {}) as { detail?: unknown; title?: unknown; problems?: unknown };
  const detail = typeof problem.detail === 'string' ? problem.detail : typeof problem.title === 'string' ? problem.title : `HTTP ${status}`;
  const problems = Array.isArray(problem.problems)
    ? problem.problems.filter((p): p is Problem => typeof p === 'object' && p !== null && typeof (p as Problem).message === 'string').map((p) => ({ path: String(p.path ?? ''), message: p.message }))
    : [];
  const auth = status === 401 ? ' (pass --token, set LLMGW_ADMIN_TOKEN or `token:` in the config file)' : '';
  return new ApiError(`${server}: ${method} ${path}: ${status} ${detail}${auth}`, status, problems, body);
}

function hint(server: ServerName): string {
  return server === 'controller' ? 'pass --controller URL or set LLMGW_CONTROLLER_URL' : 'pass --catalog URL or set LLMGW_CATALOG_URL';
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
