/** One HTTP response as the downloader reads it. */
export interface HttpResponse {
  readonly status: number;
  /** A response header (case-insensitive name); undefined when absent. */
  header(name: string): string | undefined;
  /** The body; read it to the end or call `cancel()`. */
  readonly body: AsyncIterable<Uint8Array>;
  cancel(): Promise<void>;
}

/** The little of HTTP the weights fetcher needs: a GET that follows redirects. */
export interface HttpClient {
  get(url: string, options: { readonly headers: Readonly<Record<string, string>>; readonly signal: AbortSignal }): Promise<HttpResponse>;
}

/**
 * HttpClient over Node's global fetch (undici): follows redirects (Hugging Face answers a resolve
 * URL with a redirect to its CDN; fetch drops `Authorization` when a redirect leaves the origin).
 */
export class FetchHttpClient implements HttpClient {
  async get(url: string, options: { readonly headers: Readonly<Record<string, string>>; readonly signal: AbortSignal }): Promise<HttpResponse> {
    const res = await fetch(url, { headers: { ...options.headers }, signal: options.signal, redirect: 'follow' });
    const body = res.body;
    return {
      status: res.status,
      header: (name) => res.headers.get(name) ?? undefined,
      body: body ?? emptyBody(),
      cancel: async () => {
        await body?.cancel().catch(() => undefined);
      },
    };
  }
}

async function* emptyBody(): AsyncIterable<Uint8Array> {
  // no body
}
