import type { ApiEndpoint } from '@llmgw/domain';
import type { Waiter } from '../admission/admission.service';
import type { ChoiceReason, EndpointLease } from '../admission/endpoint.lease';
import type { RouterKey } from '../auth/api-key.authenticator';
import type { EndpointState } from '../endpoints/endpoint.state';
import type { ApiRequest, ApiResponse, EngineCallTimeouts } from '../http1';
import type { KeyAdmission } from '../tenancy/key-limits.stage';
import type { JsonUsageTail, SseUsageTap } from '../tenancy/response-usage';

export type RouteName = ApiEndpoint | 'models';

const EMPTY = Buffer.alloc(0);

/** One try at one endpoint, as the rest of the path sees it (see Relay). */
export interface Attempt {
  readonly lease: EndpointLease;
  /** Ends the try if it still runs: the endpoint is released as abandoned and the engine call aborted. */
  abandon(): void;
}

/** One client request, from arrival to the end of its response: what every stage of the path reads and writes. */
export class Exchange {
  model = '';
  /** The API key the request came with, when keys are checked. */
  key: RouterKey | undefined;
  /** Its claim on the key's limits, settled when the answer ends. */
  limits: KeyAdmission | undefined;
  /** The engine was asked for a stream's usage chunk the client did not ask for: it is taken out on the way back. */
  stripUsage = false;
  /** Reads the answer's token usage on its way to the client (requests with a key). */
  usageTap: SseUsageTap | undefined;
  usageTail: JsonUsageTail | undefined;
  /** The model's deadlines (its catalog values, else the router's). */
  timeouts: EngineCallTimeouts | undefined;
  body: Buffer = EMPTY;
  /** Request header lines forwarded to the engine, ending with Content-Length and the blank line. */
  headerBlock: string | undefined;
  queuedMs = 0;
  /** Why the first endpoint was chosen (for the debug header). */
  reason: ChoiceReason | undefined;
  attempts = 0;
  first: EndpointState | undefined;
  tried: Set<EndpointState> | undefined;
  /** The attempt in progress (or the last one). */
  current: Attempt | undefined;
  waiter: Waiter | undefined;
  staleRetried = false;
  clientGone = false;
  finished = false;
  sse = false;
  fixedLength = false;
  /** Body length announced by the engine (framing 'length'); the last piece ends the response in the same write. */
  expectedBytes = -1;
  ended = false;
  bytes = 0;
  lastChunk: Buffer | undefined;
  status = 0;
  resume: (() => void) | undefined;
  /** Set while an engine's non-2xx answer is held to be normalised: the header pairs kept, and its body so far. */
  engineError: { headers: string[]; pieces: Buffer[]; bytes: number } | undefined;

  constructor(
    readonly req: ApiRequest,
    readonly res: ApiResponse,
    readonly route: RouteName,
    readonly start: number,
  ) {}
}
