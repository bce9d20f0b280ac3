import type { ServerWritableStream } from '@grpc/grpc-js';
import { DomainError, ErrorCode, type Clock, type EndpointSink, type EndpointSnapshot } from '@llmgw/domain';
import { RouterServiceService, WatchResponse, type ReportUsageRequest, type ReportUsageResponse, type WatchRequest } from '@llmgw/proto';
import type { KeyUsageRow } from '@llmgw/store';
import type { Logger } from 'pino';
import type { EndpointPublisher } from '../publishing/endpoint.publisher';
import type { Admission } from './agent.service';
import { assertClaimMatchesCertificate, type AuthContextCall } from './grpc-auth';
import { grpcStatusOf } from './grpc-errors';
import { encodeCompressedWatchResponse, encodeWatchResponse } from './snapshot.encoder';

/** How far ahead of the controller's clock a router's usage time may be before it is clamped to now. */
export const USAGE_FUTURE_SKEW_MS = 5_000;

/** What RouterService checks calls against. */
export interface RouterServiceOptions {
  readonly clock: Clock;
  /** Called with how many usage times of one report were later than now + skew (and clamped). */
  readonly futureUsageClamped: (count: number) => void;
  /** Whether this controller leads (once its state is loaded), and where the leader is when not. */
  readonly admit: () => Promise<Admission>;
  /** Stores what keyed requests used (per key, model and hour); a failure makes the router keep and resend them. */
  readonly writeKeyUsage?: (rows: KeyUsageRow[]) => Promise<void>;
}

const HOUR_MS = 3_600_000;
const MAX_COUNT = 1e15;

/** The key usage rows of a report that make sense; the rest are dropped (and counted by the caller). */
export function keyUsageRows(report: ReportUsageRequest, now: number): { rows: KeyUsageRow[]; dropped: number } {
  const rows: KeyUsageRow[] = [];
  let dropped = 0;
  const count = (v: number): boolean => Number.isSafeInteger(v) && v >= 0 && v <= MAX_COUNT;
  for (const k of report.keyUsage) {
    const sane =
      k.key !== '' && k.key.length <= 64 && k.model !== '' && k.model.length <= 256 && k.hourUnixMs % HOUR_MS === 0 && k.hourUnixMs <= now + HOUR_MS && k.hourUnixMs >= now - 400 * 24 * HOUR_MS && k.requests > 0 && count(k.requests) && count(k.promptTokens) && count(k.completionTokens);
    if (!sane) {
      dropped++;
      continue;
    }
    rows.push({ key: k.key, model: k.model, hour: k.hourUnixMs, requests: k.requests, promptTokens: k.promptTokens, completionTokens: k.completionTokens });
  }
  return { rows, dropped };
}

/** Where usage reports go (the usage tracker). Times are ms since the epoch. */
export interface UsageReceiver {
  report(routerId: string, lastUsed: ReadonlyMap<string, number>): void;
}

/**
 * RouterService's definition with a Watch serializer that passes pre-encoded bytes through, so
 * every watcher gets the same buffer and a snapshot is encoded (and compressed) once however many
 * routers watch (see encodeWatchResponse, encodeCompressedWatchResponse).
 */
export const ROUTER_SERVICE_DEFINITION = {
  ...RouterServiceService,
  watch: {
    ...RouterServiceService.watch,
    responseSerialize: (value: WatchResponse | Buffer): Buffer =>
      Buffer.isBuffer(value) ? value : Buffer.from(WatchResponse.encode(value).finish()),
  },
} as const;

/**
 * One watching router: writes each snapshot it is given, compressed when the router asked for
 * it; while the stream is backed up it keeps only the newest, so a slow router skips revisions
 * instead of buffering every one.
 */
class WatchSink implements EndpointSink {
  private waiting: EndpointSnapshot | undefined;
  private blocked = false;
  private readonly encode: (s: EndpointSnapshot) => Buffer;

  constructor(private readonly call: ServerWritableStream<WatchRequest, WatchResponse>) {
    this.encode = call.request.acceptCompressed ? encodeCompressedWatchResponse : encodeWatchResponse;
    call.on('drain', () => {
      this.blocked = false;
      const next = this.waiting;
      this.waiting = undefined;
      if (next) this.publish(next);
    });
  }

  publish(snapshot: EndpointSnapshot): void {
    if (this.call.cancelled || this.call.writableEnded) return;
    if (this.blocked) {
      this.waiting = snapshot;
      return;
    }
    // The definition's serializer passes the Buffer through as the encoded WatchResponse.
    const ok = this.call.write(this.encode(snapshot) as unknown as WatchResponse);
    if (!ok) this.blocked = true;
  }

  /** Tells the router this controller no longer leads (naming nobody: it does not know who does yet) and ends the stream. */
  leadershipLost(): void {
    if (this.call.cancelled || this.call.writableEnded) return;
    this.waiting = undefined;
    this.call.write({ notLeader: {} });
    this.call.end();
  }
}

/**
 * `RouterService` (the router token was checked before the call got here: grpc-auth.ts; with
 * mutual TLS the router id a call claims must be its certificate's). Watch, on the leader,
 * attaches the router's stream to the publisher (the current snapshot at once, then every change;
 * `compressed` when the router set `accept_compressed`, the plain `snapshot` otherwise) until the
 * router goes away; on a standby it answers one `not_leader` (naming a live leader only) and ends
 * the stream, so routers watch the controller that knows the cluster's health rather than a copy
 * read back from the store. ReportUsage, served anywhere, hands the last-used map to the usage
 * tracker, dropping entries whose time is 0 as the contract says and clamping times later than
 * now + {@link USAGE_FUTURE_SKEW_MS} to now (the newest time wins, so a time in the future would
 * otherwise hold a replica "in use" for as long as the controller runs). Key usage in the same
 * report is stored by the leader only: a standby answers FAILED_PRECONDITION (naming the leader
 * when it knows one) and the router keeps the rows for the controller its watch follows.
 */
export class RouterCalls {
  private readonly log: Logger;

  constructor(
    private readonly publisher: EndpointPublisher,
    private readonly usage: UsageReceiver,
    private readonly options: RouterServiceOptions,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'RouterService' });
  }

  /** Serves one Watch stream; resolves when it has ended (the router went away, or was sent elsewhere). */
  watch(call: ServerWritableStream<WatchRequest, WatchResponse>): Promise<void> {
    const { log, options, publisher } = this;
    const routerId = call.request.routerId || call.getPeer();
    if (call.request.routerId !== '') assertClaimMatchesCertificate(call, call.request.routerId, 'router id');
    return new Promise<void>((resolve) => {
      options.admit().then(
        (admission) => {
          if (call.cancelled || call.writableEnded) return resolve();
          if (!admission.leader) {
            log.info({ routerId, leader: admission.leaderAddress ?? '-' }, 'not the leader: router sent elsewhere');
            call.write({ notLeader: admission.leaderAddress !== undefined ? { leaderAddress: admission.leaderAddress } : {} });
            call.end();
            return resolve();
          }
          log.info({ routerId, compressed: call.request.acceptCompressed }, 'router watching');
          const detach = publisher.attach(new WatchSink(call));
          let done = false;
          const end = (): void => {
            if (done) return;
            done = true;
            detach();
            log.info({ routerId }, 'router stopped watching');
            resolve();
          };
          call.on('cancelled', end);
          call.on('close', end);
          call.on('error', end);
          call.on('finish', end);
          // The router went away while admission waited.
          if (call.cancelled) end();
        },
        (error: unknown) => {
          log.warn({ err: error, routerId }, 'cannot tell whether this controller leads');
          call.emit('error', grpcStatusOf(new DomainError(ErrorCode.Unavailable, 'the controller cannot tell whether it leads now; retry')));
          resolve();
        },
      );
    });
  }

  async reportUsage(request: ReportUsageRequest, call: AuthContextCall): Promise<ReportUsageResponse> {
    const { log, options } = this;
    if (request.routerId !== '') assertClaimMatchesCertificate(call, request.routerId, 'router id');
    const now = options.clock.now();
    const lastUsed = new Map<string, number>();
    let clamped = 0;
    for (const [id, at] of Object.entries(request.lastUsedUnixMs)) {
      if (!(at > 0)) continue;
      if (at > now + USAGE_FUTURE_SKEW_MS) clamped += 1;
      lastUsed.set(id, at > now + USAGE_FUTURE_SKEW_MS ? now : at);
    }
    if (clamped > 0) {
      options.futureUsageClamped(clamped);
      log.warn({ routerId: request.routerId, clamped }, 'router reported usage times in the future; clamped to now');
    }
    this.usage.report(request.routerId, lastUsed);
    const { rows, dropped } = keyUsageRows(request, now);
    if (dropped > 0) log.warn({ routerId: request.routerId, dropped }, 'router reported key usage that makes no sense; dropped');
    if (rows.length === 0 || options.writeKeyUsage === undefined) return {};
    // Key usage is written by the leader only (as every other change is): a standby refuses it,
    // the router keeps the rows and sends them to the controller its watch follows, which
    // NotLeader moves to the leader. The last-used times above are taken anywhere.
    let admission: Admission;
    try {
      admission = await options.admit();
    } catch (error) {
      log.warn({ routerId: request.routerId, err: error instanceof Error ? error.message : String(error) }, 'cannot tell whether this controller leads; key usage not stored');
      throw new DomainError(ErrorCode.Unavailable, 'key usage could not be stored; send it again');
    }
    if (!admission.leader) {
      log.info({ routerId: request.routerId, leader: admission.leaderAddress ?? '-' }, 'not the leader: key usage refused, the router sends it to the leader');
      const where = admission.leaderAddress !== undefined ? `the leader is at ${admission.leaderAddress}` : 'no leader is known yet';
      throw new DomainError(ErrorCode.PreconditionFailed, `not the leader: key usage is stored by the leader (${where}); send it there`);
    }
    try {
      await options.writeKeyUsage(rows);
    } catch (error) {
      log.warn({ routerId: request.routerId, err: error instanceof Error ? error.message : String(error) }, 'key usage not stored; the router keeps it and sends it again');
      throw new DomainError(ErrorCode.Unavailable, 'key usage could not be stored; send it again');
    }
    return {};
  }
}
