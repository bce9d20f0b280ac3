import type { ServerUnaryCall, ServerWritableStream, sendUnaryData } from '@grpc/grpc-js';
import {
  RouterServiceService,
  WatchResponse,
  type ReportUsageRequest,
  type ReportUsageResponse,
  type RouterServiceServer,
  type WatchRequest,
} from '@llmgw/proto';
import type { Logger } from 'pino';
import type { EndpointSink, EndpointSnapshot } from '../publishing/endpoint-sink.port';
import type { EndpointPublisher } from '../publishing/endpoint.publisher';
import { encodeCompressedWatchResponse, encodeWatchResponse } from './snapshot.encoder';

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
}

/**
 * `RouterService`: Watch attaches the router's stream to the publisher (the current snapshot
 * at once, then every change; `compressed` when the router set `accept_compressed`, the plain
 * `snapshot` otherwise) until the router goes away; ReportUsage hands the last-used map to
 * the usage tracker, dropping entries whose time is 0 as the contract says.
 */
export function routerService(publisher: EndpointPublisher, usage: UsageReceiver, logger: Logger): RouterServiceServer {
  const log = logger.child({ context: 'RouterService' });
  return {
    watch(call: ServerWritableStream<WatchRequest, WatchResponse>) {
      const routerId = call.request.routerId || call.getPeer();
      log.info({ routerId, compressed: call.request.acceptCompressed }, 'router watching');
      const detach = publisher.attach(new WatchSink(call));
      let done = false;
      const end = (): void => {
        if (done) return;
        done = true;
        detach();
        log.info({ routerId }, 'router stopped watching');
      };
      call.on('cancelled', end);
      call.on('close', end);
      call.on('error', end);
    },
    reportUsage(call: ServerUnaryCall<ReportUsageRequest, ReportUsageResponse>, callback: sendUnaryData<ReportUsageResponse>) {
      const lastUsed = new Map<string, number>();
      for (const [id, at] of Object.entries(call.request.lastUsedUnixMs)) if (at > 0) lastUsed.set(id, at);
      usage.report(call.request.routerId, lastUsed);
      callback(null, {});
    },
  };
}
