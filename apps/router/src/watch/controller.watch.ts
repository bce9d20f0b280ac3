import type { Clock, ManagedKey, Rng } from '@llmgw/domain';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { LeaderFollower, type FollowOutcome } from '@llmgw/lease';
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
  /** Controller gRPC addresses (`host:port`), tried in turn (see LeaderFollower). */
  readonly addresses: readonly string[];
  readonly routerId: string;
  /** LLMGW_ROUTER_CONTROLLER_TOKEN, sent as `authorization: Bearer`; unset = none sent. */
  readonly token?: string;
  readonly backoffMinMs: number;
  readonly backoffMaxMs: number;
  readonly rng: Rng;
  readonly clock: Clock;
}

/** Where the watch stands, for readiness detail and metrics. */
export interface WatchState {
  /** A stream is open and has delivered a snapshot. */
  readonly connected: boolean;
  /** The controller address the watch is on (connected) or tries next. */
  readonly controller: string;
  /**
   * How long the routing table has gone without a live stream behind it, ms: 0 while connected,
   * else the time since the last stream that delivered a snapshot ended; undefined before any
   * snapshot (nothing is held, so nothing is stale).
   */
  readonly staleMs: number | undefined;
}

/** What the watch reports (metrics, readiness). */
export interface ControllerWatchHooks {
  /** Every snapshot received, applied or not; `resync` = first of its stream. */
  snapshot?(result: ApplyResult, resync: boolean): void;
  /** A compressed snapshot that did not inflate or decode; the stream is dropped and reopened. */
  invalid?(): void;
  /** The stream was opened again after it ended or failed. */
  reconnect?(): void;
  /** A controller answered that it does not lead. */
  notLeader?(): void;
  /** An applied snapshot's keys (undefined: the controller manages none) and its count of routers. */
  tenancy?(keys: readonly ManagedKey[] | undefined, routers: number): void;
}

/**
 * Follows `RouterService.Watch` on the leading controller: applies each complete snapshot to the
 * registry, ignoring ones older than the current revision within a stream. It asks for
 * compressed snapshots and skips a stale one by its revision without inflating it; one that does
 * not inflate or decode is logged and the stream is dropped, as if it had failed. A standby's
 * NotLeader is followed to the leader it names; otherwise, and when a stream ends or fails, the
 * next controller address is tried by {@link LeaderFollower}'s rule (at once within a round,
 * a short pause after a round some standby answered, exponential backoff after a round nobody
 * answered). The first snapshot of every new stream replaces everything whatever its revision
 * (another or a restarted controller counts from its own start), so no endpoint the controller
 * no longer lists survives a reconnect. While no controller answers the router keeps routing
 * with what it last knew, and {@link state} says for how long.
 */
export class ControllerWatch {
  private call: ClientReadableStream<WatchResponse> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly follower: LeaderFollower;
  private stopped = true;
  private streamLive = false;
  private opened = 0;
  /** When the last live stream ended; undefined while one is live or before the first. */
  private liveEndedAt: number | undefined;

  constructor(
    /** The gRPC client for one controller address (the caller keeps one per address). */
    private readonly clientFor: (address: string) => RouterServiceClient,
    private readonly registry: EndpointRegistry,
    private readonly options: ControllerWatchOptions,
    private readonly logger: Logger,
    private readonly hooks: ControllerWatchHooks = {},
  ) {
    this.follower = new LeaderFollower(options.addresses, { minMs: options.backoffMinMs, maxMs: options.backoffMaxMs }, options.rng);
  }

  /** True while a stream is open and has delivered at least one snapshot. */
  get connected(): boolean {
    return this.streamLive;
  }

  /** The controller the watch is on, or tries next. */
  get controller(): string {
    return this.follower.current();
  }

  get state(): WatchState {
    const staleMs = this.streamLive ? 0 : this.liveEndedAt !== undefined ? this.options.clock.now() - this.liveEndedAt : undefined;
    return { connected: this.streamLive, controller: this.follower.current(), staleMs };
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
    const address = this.follower.current();
    const call = this.clientFor(address).watch({ routerId: this.options.routerId, acceptCompressed: true }, controllerMetadata(this.options.token));
    this.call = call;
    let first = true;
    let ended = false;
    const end = (reason: string, outcome: FollowOutcome = { kind: 'failed' }): void => {
      if (ended) return;
      ended = true;
      if (this.call !== call) return;
      this.call = undefined;
      if (this.streamLive) this.liveEndedAt = this.options.clock.now();
      this.streamLive = false;
      if (this.stopped) return;
      const delay = this.follower.next(outcome);
      const next = this.follower.current();
      if (outcome.kind === 'notLeader') this.logger.info({ controller: address, leader: outcome.leaderAddress ?? '-', next, retryInMs: delay }, 'controller is not the leader');
      else this.logger.warn({ controller: address, reason, next, retryInMs: delay }, 'watch stream to the controller ended; reconnecting');
      this.timer = setTimeout(() => this.open(), delay);
      this.timer.unref();
    };
    call.on('data', (message: WatchResponse) => {
      if (this.call !== call) return;
      if (message.notLeader !== undefined) {
        this.hooks.notLeader?.();
        const leader = message.notLeader.leaderAddress;
        end('not the leader', { kind: 'notLeader', ...(leader !== undefined && leader !== '' ? { leaderAddress: leader } : {}) });
        call.cancel();
        return;
      }
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
      const { snapshot, dropped, routingProblems } = snapshotFromProto(wire);
      for (const problem of routingProblems ?? []) this.logger.warn({ problem }, "model routing not understood: the router's default policy applies");
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
      if (result.applied) this.hooks.tenancy?.(snapshot.keys?.keys, snapshot.routers ?? 1);
      this.hooks.snapshot?.(result, resync);
    });
    call.on('error', (error: Error & { code?: number; details?: string }) => end(error.details ?? error.message));
    call.on('end', () => end('stream ended by the controller'));
  }

  /** A readable snapshot arrived: the stream is live and the backoff starts over. */
  private accepted(): void {
    if (!this.streamLive) this.follower.connected();
    this.streamLive = true;
    this.liveEndedAt = undefined;
  }
}
