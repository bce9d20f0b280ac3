/**
 * One API request as the proxy sees it, whichever HTTP/1.1 reader took it off the wire (the
 * router's own front end, or Node's server for what the front end hands over): the head and the
 * whole body, read once and bounded.
 */
export interface ApiRequest {
  readonly method: string;
  readonly url: string;
  /** Lower-cased names; a repeated header's values joined with ", ". */
  readonly headers: Record<string, string | undefined>;
  /** `[name, value, name, value, ...]` as received. */
  readonly rawHeaders: readonly string[];
  /** The whole body; empty when it was not read (too large, or `readBody` said no). */
  readonly body: Buffer;
  /** The body is larger than the limit (as declared, or as it arrived) and was not read: the handler answers 413. */
  readonly bodyTooLarge: boolean;
}

/** The part of a response the proxy uses; Node's ServerResponse and the fast front end's FastResponse both have it. */
export interface ApiResponse {
  readonly headersSent: boolean;
  readonly writableFinished: boolean;
  writeHead(status: number, headers: string[] | Record<string, string | number>): unknown;
  /** False when the client is backed up: wait for 'drain'. */
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer | string, done?: () => void): unknown;
  destroy(): unknown;
  /** The response closed: after it ended, or because the client went away before (see `writableFinished`). */
  on(event: 'close', listener: () => void): unknown;
  once(event: 'drain', listener: () => void): unknown;
}

/** Serves one API request (never throws; always ends or destroys the response). */
export type ApiHandler = (req: ApiRequest, res: ApiResponse) => void;

/** How a reader bounds a request body before the handler sees it. */
export interface BodyLimits {
  /** Largest body read; a larger one is dispatched unread with `bodyTooLarge`. */
  readonly maxBodyBytes: number;
  /**
   * Whether to read the body of a request with these headers (checked before any body byte is
   * kept; e.g. false for a bad API key). False dispatches it unread: the handler must refuse it.
   * Default: always read.
   */
  readonly readBody?: (head: { readonly headers: Readonly<Record<string, string | undefined>> }) => boolean;
}
