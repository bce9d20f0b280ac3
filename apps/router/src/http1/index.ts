/**
 * The router's HTTP/1.1 wire code, as the rest of the router sees it. Clients: two readers
 * produce one request shape (ApiRequest, body whole) for one ApiHandler — the router's own
 * front end (FastHttpFrontend) and Node's server for what it hands over (serveNodeRequest).
 * Engines: a pool of keep-alive connections that sends a request's bytes and reports the
 * response through an EngineResponseHandler. Parsers and syntax stay inside.
 */
export type { ApiHandler, ApiRequest, ApiResponse, BodyLimits } from './api-exchange';
export { isApiPath } from './api-path';
export { EnginePool, type EngineAddress, type EngineCall, type EngineCallTimeouts, type EngineRequestError, type EngineResponseHandler } from './engine-connection.pool';
export { FastHttpFrontend, type FastFrontendOptions } from './fast-http.frontend';
export { joinForWrite } from './http1.syntax';
export type { ResponseHead } from './http1-response.parser';
export { serveNodeRequest } from './node-request.reader';
