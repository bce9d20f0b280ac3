import type { IncomingMessage } from 'node:http';
import type { FastRequest } from './fast-http.frontend';

/** A request the proxy serves: Node's, whose body it reads from the stream, or the fast front end's, which arrives whole. */
export type ApiRequest = IncomingMessage | FastRequest;

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
