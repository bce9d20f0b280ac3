import { lookup as dnsLookup } from 'node:dns/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';

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

/** Which addresses may be connected to: a reason when `address` (an IP literal) is refused. */
export interface AddressPolicy {
  addressProblem(address: string): string | undefined;
}

/** Resolves a host name to every address it has (dns.lookup by default). */
export type Resolver = (host: string) => Promise<readonly { readonly address: string; readonly family: number }[]>;

/** A connection or redirect the address policy refused: not worth retrying. */
export class AddressRefusedError extends Error {
  readonly retryable = false;
  constructor(message: string) {
    super(message);
    this.name = 'AddressRefusedError';
  }
}

const MAX_REDIRECTS = 10;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * HttpClient over node:http(s) that connects only where the address policy allows. The check
 * runs on the address actually connected to: in the socket's lookup hook for a host name (so a
 * name that resolves to a public address once and to 169.254.169.254 the next time cannot slip
 * through), before connecting for an IP literal. A host name any of whose addresses is refused
 * is refused. Redirects (Hugging Face answers with one to its CDN) are followed by hand, at most
 * ten, each target checked the same way; never from https to http, and `Authorization` is
 * dropped when one leaves the origin.
 */
export class PolicyHttpClient implements HttpClient {
  constructor(
    private readonly policy: AddressPolicy,
    private readonly resolve: Resolver = (host) => dnsLookup(host, { all: true, verbatim: true }),
  ) {}

  async get(url: string, options: { readonly headers: Readonly<Record<string, string>>; readonly signal: AbortSignal }): Promise<HttpResponse> {
    let current = new URL(url);
    let headers: Record<string, string> = { ...options.headers };
    for (let hop = 0; ; hop++) {
      if (current.protocol !== 'http:' && current.protocol !== 'https:') throw new AddressRefusedError(`refused ${current.href}: only http and https are fetched`);
      const host = current.hostname.replace(/^\[|\]$/g, '');
      const literal = this.policy.addressProblem(host);
      if (literal !== undefined) throw new AddressRefusedError(`refused to connect to ${current.origin}: ${host} ${literal}`);
      const res = await this.request(current, headers, options.signal);
      const location = res.headers.location;
      if (!REDIRECTS.has(res.statusCode ?? 0) || location === undefined) return wrap(res);
      res.destroy();
      if (hop >= MAX_REDIRECTS) throw new AddressRefusedError(`${url}: more than ${MAX_REDIRECTS} redirects`);
      const next = new URL(location, current);
      if (current.protocol === 'https:' && next.protocol === 'http:') throw new AddressRefusedError(`${current.href} redirects to plain http (${next.origin}); refused`);
      if (next.origin !== current.origin) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => k.toLowerCase() !== 'authorization'));
      current = next;
    }
  }

  private request(url: URL, headers: Record<string, string>, signal: AbortSignal): Promise<IncomingMessage> {
    const lookup: LookupFunction = (hostname, opts, callback) => {
      this.resolve(hostname).then(
        (addresses) => {
          const wanted = addresses.filter((a) => !opts.family || a.family === opts.family);
          if (wanted.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
          for (const a of wanted) {
            const problem = this.policy.addressProblem(a.address);
            if (problem !== undefined) return callback(new AddressRefusedError(`refused to connect to ${hostname}: it resolves to ${a.address}, which ${problem}`), '', 0);
          }
          if (opts.all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, wanted.map((a) => ({ address: a.address, family: a.family })));
          else callback(null, wanted[0].address, wanted[0].family);
        },
        (error: Error) => callback(error as NodeJS.ErrnoException, '', 0),
      );
    };
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(url, { method: 'GET', headers, signal, lookup, agent: false }, resolve);
      req.on('error', (error) => reject(refusal(error) ?? error));
      req.end();
    });
  }
}

/** The AddressRefusedError behind a socket error, if that is what it was. */
function refusal(error: unknown): AddressRefusedError | undefined {
  if (error instanceof AddressRefusedError) return error;
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  return cause instanceof AddressRefusedError ? cause : undefined;
}

function wrap(res: IncomingMessage): HttpResponse {
  return {
    status: res.statusCode ?? 0,
    header: (name) => {
      const v = res.headers[name.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : v;
    },
    body: bodyOf(res),
    cancel: async () => {
      res.destroy();
    },
  };
}

/**
 * The body's chunks, every byte that arrived before an error included: a connection cut
 * mid-body ends the iteration with an error only after the bytes it delivered (the downloader
 * resumes from them). Read in flowing mode with a small queue; paused while the queue is full.
 * It listens from the moment the response arrives, not from the first read: a connection cut
 * before the reader starts (the downloader opens its file in between) would otherwise have
 * closed the response unseen and left the reader waiting forever.
 */
function bodyOf(res: IncomingMessage): AsyncIterable<Uint8Array> {
  const queue: Buffer[] = [];
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const poke = (): void => {
    wake?.();
    wake = undefined;
  };
  res.on('data', (chunk: Buffer) => {
    queue.push(chunk);
    if (queue.length >= 16) res.pause();
    poke();
  });
  res.on('end', () => {
    ended = true;
    poke();
  });
  res.on('error', (error) => {
    failure = error;
    poke();
  });
  res.on('close', () => {
    if (!ended && failure === undefined) failure = new Error('the connection closed before the body ended');
    poke();
  });
  return {
    async *[Symbol.asyncIterator]() {
      for (;;) {
        const chunk = queue.shift();
        if (chunk !== undefined) {
          if (queue.length < 4 && res.isPaused()) res.resume();
          yield chunk;
          continue;
        }
        if (failure !== undefined) throw failure;
        if (ended) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}
