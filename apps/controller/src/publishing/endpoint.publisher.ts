import type { Catalog } from '@llmgw/catalog';
import type { CatalogView, Endpoint, EndpointSink, EndpointSnapshot, KeySetView } from '@llmgw/domain';
import type { Logger } from 'pino';
import { buildCatalogView, buildEndpoints, type EndpointMemo, type NodeEntry, type ReplicaEntry } from '@llmgw/control';

/** What a snapshot is built from, read at publish time. */
export interface PublishSource {
  nodes(): ReadonlyMap<string, NodeEntry>;
  replicas(): Iterable<ReplicaEntry>;
  catalog(): { readonly catalog: Catalog; readonly revision: number } | undefined;
  /** The managed API keys (the same object while none changed); undefined while none is managed. */
  keys?(): KeySetView | undefined;
}

/**
 * Turns the cluster state into revisioned snapshots and hands each to every attached sink.
 * A new revision is made only when the endpoints or the catalog view changed, so revisions only
 * grow and consecutive snapshots always differ. Nothing is published before `open()` (the state
 * is loaded): a router's first snapshot from a restarted controller must not be an empty one.
 */
export class EndpointPublisher {
  private readonly sinks = new Set<EndpointSink>();
  private snapshot: EndpointSnapshot | undefined;
  private readonly memo: EndpointMemo = new WeakMap();
  /** The last published endpoints by replica id, to reuse equal ones (see `canonical`). */
  private published = new Map<string, Endpoint>();
  private catalogRef: Catalog | undefined;
  private catalogRevision = -1;
  private catalogView: CatalogView | undefined;
  private opened = false;
  private scheduled = false;
  private revision = 0;
  private readonly publishListeners: ((seconds: number) => void)[] = [];

  constructor(
    private readonly source: PublishSource,
    private readonly logger: Logger,
    /** Told how long each new revision took to build and hand to every sink, seconds. */
    observe?: (seconds: number) => void,
  ) {
    if (observe) this.publishListeners.push(observe);
  }

  /** Calls `listener` with how long each new revision took to build and hand to every sink, seconds. */
  onPublished(listener: (seconds: number) => void): void {
    this.publishListeners.push(listener);
  }

  /** The snapshot sinks last got; undefined before the first. */
  current(): EndpointSnapshot | undefined {
    return this.snapshot;
  }

  /** Number of attached sinks (watching routers and in-process ones). */
  get sinkCount(): number {
    return this.sinks.size;
  }

  /** Attached sinks that are remote routers (they can end their stream). */
  private routerCount(): number {
    let n = 0;
    for (const sink of this.sinks) if (sink.leadershipLost !== undefined) n++;
    return n;
  }

  /** Attaches a sink: it gets the current snapshot now (if any) and every later one. Returns the detach function. */
  attach(sink: EndpointSink): () => void {
    this.sinks.add(sink);
    if (this.snapshot) this.deliver(sink, this.snapshot);
    return () => {
      this.sinks.delete(sink);
    };
  }

  /**
   * This controller stopped leading: every sink that can end its stream does (and is detached),
   * so watching routers go to the new leader instead of following a view nobody updates.
   */
  leadershipLost(): void {
    for (const sink of this.sinks) {
      if (sink.leadershipLost === undefined) continue;
      this.sinks.delete(sink);
      try {
        sink.leadershipLost();
      } catch (error) {
        this.logger.warn({ err: error }, 'an endpoint sink threw on leadership loss');
      }
    }
  }

  /** State is loaded: publish from now on. */
  open(): void {
    this.opened = true;
    this.refresh();
  }

  /** Recomputes soon (once per turn of the event loop however many changes arrive). */
  schedule(): void {
    if (this.scheduled || !this.opened) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.refresh();
    });
  }

  /** Recomputes now; publishes a new revision when anything a router sees changed. */
  refresh(): EndpointSnapshot | undefined {
    if (!this.opened) return undefined;
    const started = performance.now();
    const current = this.source.catalog();
    if (current?.catalog !== this.catalogRef || (current?.revision ?? 0) !== this.catalogRevision) {
      this.catalogRef = current?.catalog;
      this.catalogRevision = current?.revision ?? 0;
      this.catalogView = buildCatalogView(current?.catalog, this.catalogRevision);
    }
    const previous = this.snapshot;
    const endpoints = canonical(buildEndpoints(this.source.nodes(), this.source.replicas(), current?.catalog, this.memo), this.published);
    const keys = this.source.keys?.();
    // Read at each refresh (every tick), not on each attach: routers joining at once make one revision.
    const routers = this.routerCount();
    if (previous && previous.catalog === this.catalogView && previous.keys === keys && previous.routers === routers && sameEndpoints(previous.endpoints, endpoints)) return previous;
    this.revision += 1;
    const snapshot: EndpointSnapshot = Object.freeze({ revision: this.revision, endpoints, catalog: this.catalogView as CatalogView, ...(keys !== undefined && { keys }), routers });
    this.published = new Map(endpoints.map((e) => [e.replicaId, e]));
    this.snapshot = snapshot;
    this.logger.debug({ revision: snapshot.revision, endpoints: endpoints.length, catalogRevision: this.catalogRevision }, 'endpoint snapshot');
    for (const sink of this.sinks) this.deliver(sink, snapshot);
    const seconds = (performance.now() - started) / 1000;
    for (const l of this.publishListeners) l(seconds);
    return snapshot;
  }

  private deliver(sink: EndpointSink, snapshot: EndpointSnapshot): void {
    try {
      sink.publish(snapshot);
    } catch (error) {
      this.logger.warn({ err: error }, 'an endpoint sink threw; detaching it');
      this.sinks.delete(sink);
    }
  }
}

/**
 * The endpoints with every one equal to its last published version replaced by that object, so
 * a replica whose entry changed in ways routers do not see (last use, restarts) keeps its
 * endpoint object: identity then means "unchanged", and encoded bytes cached per object stay valid.
 */
function canonical(endpoints: Endpoint[], published: ReadonlyMap<string, Endpoint>): Endpoint[] {
  for (let i = 0; i < endpoints.length; i++) {
    const e = endpoints[i];
    const old = published.get(e.replicaId);
    if (old && old !== e && old.model === e.model && old.url === e.url && old.engine === e.engine && old.nodeId === e.nodeId && old.suspect === e.suspect) {
      endpoints[i] = old;
    }
  }
  return endpoints;
}

/** Same endpoints in the same order; unchanged endpoints are the same objects (see EndpointMemo), so identity decides. */
function sameEndpoints(a: readonly Endpoint[], b: readonly Endpoint[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
