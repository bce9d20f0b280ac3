import type { Rng } from '@llmgw/domain';
import type { ClientReadableStream } from '@grpc/grpc-js';
import type { EndpointSnapshot, RouterServiceClient, WatchResponse } from '@llmgw/proto';
import type { Logger } from 'pino';
import type { ApplyResult, EndpointRegistry } from '../endpoints/endpoint.registry';
import { controllerMetadata } from './controller.metadata';
import { inflateSnapshot, snapshotFromProto } from './snapshot.mapper';

/**
 * The largest Watch message the router takes, bytes: the gRPC client's receive limit for a plain
 * snapshot and the most a compressed one may inflate to (grpc-js's default, 4 MiB; a snapshot of
 * 2,100 endpoints and 1,000 models is 177 kB).
 */
export const WATCH_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** Watch settings; times in milliseconds. */
export interface ControllerWatchOptions {
  readonly routerId: string;
  /** LLMGW_ROUTER_CONTROLLER_TOKEN, sent as `authorization: Bearer`; unset = none sent. */
  readonly token?: string;
  readonly backoffMinMs: number;
  readonly backoffMaxMs: number;
  readonly rng: Rng;
}

/** What the watch reports (metrics, readiness). */
export interface ControllerWatchHooks {
  /** Every snapshot received, applied or not; `resync` = first of its stream. */
  snapshot?(result: ApplyResult, resync: boolean): void;
  /** A compressed snapshot that did not inflate or decode; the stream is dropped and reopened. */
  invalid?(): void;
  /** The stream was opened again after it ended or failed. */
  reconnect?(): void;
}

/**
 * Follows `RouterService.Watch`: applies each complete snapshot to the registry, ignoring ones
 * older than the current revision within a stream. It asks for compressed snapshots and skips a
 * stale one by its revision without inflating it; one that does not inflate or decode is logged
 * and the stream is dropped, as if it had failed. When the stream ends or fails it reopens it
 * after a jittered exponential backoff, and the first snapshot of the new stream replaces
 * everything whatever its revision (a restarted controller counts from the start again), so no
 * endpoint the controller no longer lists survives a reconnect. While disconnected the router
 * keeps routing with what it last knew.
 */
export class ControllerWatch {
  private call: ClientReadableStream<WatchResponse> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = true;
  private streamLive = false;
  private opened = 0;

  constructor(
    private readonly client: RouterServiceClient,
    private readonly registry: EndpointRegistry,
    private readonly options: ControllerWatchOptions,
    private readonly logger: Logger,
    private readonly hooks: ControllerWatchHooks = {},
  ) {}

  /** True while a stream is open and has delivered at least one snapshot. */
  get connected(): boolean {
    return this.streamLive;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.open();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    const call = this.call;
    this.call = undefined;
    this.streamLive = false;
    call?.cancel();
  }

  private open(): void {
    if (this.stopped) return;
    if (this.opened++ > 0) this.hooks.reconnect?.();
    const call = this.client.watch({ routerId: this.options.routerId, acceptCompressed: true }, controllerMetadata(this.options.token));
    this.call = call;
    let first = true;
    let ended = false;
    const end = (reason: string): void => {
      if (ended) return;
      ended = true;
      if (this.call !== call) return;
      this.call = undefined;
      this.streamLive = false;
      if (this.stopped) return;
      const delay = this.backoff();
      this.logger.warn({ reason, retryInMs: delay }, 'watch stream to the controller ended; reconnecting');
      this.timer = setTimeout(() => this.open(), delay);
      this.timer.unref();
    };
    call.on('data', (message: WatchResponse) => {
      if (this.call !== call) return;
      const resync = first;
      let wire: EndpointSnapshot;
      if (message.compressed !== undefined) {
        const { revision } = message.compressed;
        // The registry's staleness rule, decided before inflating.
        const stale = this.registry.staleResult(revision, resync);
        if (stale !== undefined) {
          this.accepted();
          this.logger.debug({ revision, current: this.registry.revision }, 'stale endpoint snapshot ignored');
          this.hooks.snapshot?.(stale, false);
          return;
        }
        try {
          wire = inflateSnapshot(message.compressed, WATCH_MAX_MESSAGE_BYTES);
          if (wire.revision !== revision) throw new Error(`carries revision ${wire.revision} inside`);
        } catch (error) {
          this.logger.error({ revision, error: (error as Error).message }, 'compressed endpoint snapshot is unreadable; dropping the stream');
          this.hooks.invalid?.();
          end(`unreadable compressed snapshot at revision ${revision}`);
          call.cancel();
          return;
        }
      } else if (message.snapshot !== undefined) {
        wire = message.snapshot;
      } else {
        return;
      }
      first = false;
      this.accepted();
      const { snapshot, dropped } = snapshotFromProto(wire);
      const result = this.registry.apply(snapshot, { resync });
      for (const d of [...dropped, ...result.skipped]) this.logger.warn({ replicaId: d.replicaId, reason: d.reason }, 'endpoint left out of the snapshot');
      if (result.applied && (result.added.length > 0 || result.removed.length > 0 || resync)) {
        this.logger.info(
          { revision: result.revision, resync, added: result.added, removed: result.removed, endpoints: this.registry.size },
          'endpoint snapshot applied',
        );
      } else if (!result.applied) {
        this.logger.debug({ revision: snapshot.revision, current: this.registry.revision }, 'stale endpoint snapshot ignored');
      }
      this.hooks.snapshot?.(result, resync);
    });
    call.on('error', (error: Error & { code?: number; details?: string }) => end(error.details ?? error.message));
    call.on('end', () => end('stream ended by the controller'));
  }

  /** A readable snapshot arrived: the stream is live and the backoff starts over. */
  private accepted(): void {
    this.failures = 0;
    this.streamLive = true;
  }

  /** Next reconnect delay: exponential from min to max, each draw in [50 %, 100 %] of it. */
  private backoff(): number {
    const ceiling = Math.min(this.options.backoffMaxMs, this.options.backoffMinMs * 2 ** Math.min(this.failures, 20));
    this.failures++;
    return Math.round(ceiling * (0.5 + 0.5 * this.options.rng.next()));
  }
}
