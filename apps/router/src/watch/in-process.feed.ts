import type { EndpointSink, EndpointSnapshot, ManagedKey } from '@llmgw/domain';
import type { Logger } from 'pino';
import type { EndpointRegistry } from '../endpoints/endpoint.registry';

/**
 * Snapshots published in this process: attaches a sink and returns the function that detaches
 * it. A controller's `EndpointPublisher.attach` is one.
 */
export type SnapshotSource = (sink: EndpointSink) => () => void;

/**
 * The router fed by a controller in the same process, in place of the watch stream: the
 * controller hands each snapshot to this sink as it publishes it, with no gRPC and no mapping
 * (it is already the domain contract). The first snapshot after `start` is applied as a resync,
 * like a new stream's first message; later ones only when newer. The sink has no
 * `leadershipLost`: the publisher keeps it attached, as it does every in-process sink.
 */
export class InProcessFeed implements EndpointSink {
  private detach: (() => void) | undefined;
  private first = true;

  constructor(
    private readonly source: SnapshotSource,
    private readonly registry: EndpointRegistry,
    private readonly logger: Logger,
    /** An applied snapshot's keys (undefined: the controller manages none) and its count of routers. */
    private readonly tenancy: (keys: readonly ManagedKey[] | undefined, routers: number) => void,
  ) {}

  start(): void {
    if (this.detach !== undefined) return;
    this.first = true;
    this.detach = this.source(this);
  }

  stop(): void {
    this.detach?.();
    this.detach = undefined;
  }

  publish(snapshot: EndpointSnapshot): void {
    const resync = this.first;
    this.first = false;
    const result = this.registry.apply(snapshot, { resync });
    for (const d of result.skipped) this.logger.warn({ replicaId: d.replicaId, reason: d.reason }, 'endpoint left out of the snapshot');
    if (!result.applied) return;
    if (result.added.length > 0 || result.removed.length > 0 || resync) {
      this.logger.info({ revision: result.revision, resync, added: result.added, removed: result.removed, endpoints: this.registry.size }, 'endpoint snapshot applied');
    }
    this.tenancy(snapshot.keys?.keys, snapshot.routers !== undefined && snapshot.routers > 0 ? snapshot.routers : 1);
  }
}
