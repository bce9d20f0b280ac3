// The controller's lifecycle: starts and stops its parts in order and connects their change
// events. Every part is its own Nest provider (controller.module.ts builds them); this file
// neither decides nor handles a report.
import type { Logger } from 'pino';
import type { CatalogReloader } from './catalog/catalog.reloader';
import type { ControllerConfig } from './config/controller.config';
import type { LeadershipService } from './leadership/leadership.service';
import type { TermService } from './leadership/term.service';
import type { AgentCommands } from './nodes/agent-commands.port';
import type { NodeRegistry } from './nodes/node.registry';
import type { EndpointPublisher } from './publishing/endpoint.publisher';
import type { Reconciler } from './reconcile/replica.reconciler';
import type { ReplicaRegistry } from './replicas/replica.registry';
import type { StatePersister } from './store/state.persister';
import type { TickLoop } from './tick/tick.loop';

/** The parts the control plane starts, stops and connects. */
export interface ControlPlaneParts {
  readonly config: Pick<ControllerConfig, 'joinToken' | 'routerToken' | 'catalogFile'>;
  readonly catalog: Pick<CatalogReloader, 'start' | 'onSwap'>;
  readonly leadership: Pick<LeadershipService, 'start' | 'stop' | 'isLeader'>;
  readonly term: Pick<TermService, 'whenLoaded' | 'refreshStandby' | 'stop'>;
  readonly nodes: Pick<NodeRegistry, 'onChange'>;
  readonly replicas: Pick<ReplicaRegistry, 'onChange'>;
  readonly publisher: Pick<EndpointPublisher, 'open' | 'schedule'>;
  readonly reconciler: Pick<Reconciler, 'capacityChanged'>;
  readonly loop: Pick<TickLoop, 'start' | 'stop' | 'requestPass'>;
  readonly persister: Pick<StatePersister, 'flush'>;
  readonly commands: Pick<AgentCommands, 'closeAll'>;
}

/**
 * One controller process: as leader it adopts what agents report for a settling window after
 * taking the lead (TermService) and only then starts or stops anything (Reconciler, on the
 * TickLoop); as a standby it turns agents away with NotLeader and serves reads (endpoints,
 * admin, metrics) from the store. This class only sequences the parts' start and stop and
 * connects the registries' and the catalog's changes to publishing and reconciling.
 */
export class ControlPlane {
  private stopped = false;
  private readonly log: Logger;

  constructor(
    private readonly parts: ControlPlaneParts,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'ControlPlane' });
    const { nodes, replicas, catalog, publisher, reconciler, loop } = parts;
    nodes.onChange((change) => {
      publisher.schedule();
      if (change.kind === 'registered' || (change.kind === 'state' && change.to === 'healthy')) reconciler.capacityChanged();
      if (change.kind === 'registered' || change.kind === 'state' || change.kind === 'cordon') loop.requestPass();
    });
    replicas.onChange(() => publisher.schedule());
    catalog.onSwap(() => {
      reconciler.capacityChanged();
      publisher.schedule();
      loop.requestPass();
    });
  }

  /**
   * Loads the catalog (seeding the store from the catalog file if it has none), joins leadership
   * and starts the tick (the gRPC transport that serves agents and routers is Nest's, started
   * beside it: controller.module.ts). A catalog file that does not validate rejects.
   */
  async start(): Promise<void> {
    const { config, catalog, leadership, term, publisher, loop } = this.parts;
    if (config.joinToken === undefined) this.log.warn('LLMGW_CONTROLLER_INSECURE_NO_AUTH: no join token; anyone who reaches the gRPC port can join as an agent');
    if (config.routerToken === undefined) this.log.warn('LLMGW_CONTROLLER_INSECURE_NO_AUTH: no router token; anyone who reaches the gRPC port can watch endpoints and report usage');
    await catalog.start(config.catalogFile);
    leadership.start();
    // Nothing is published before the state is loaded: a router's first snapshot from a
    // restarted controller must carry the endpoints the store knows, not an empty list.
    if (!leadership.isLeader()) await term.refreshStandby().catch((error: unknown) => this.log.warn({ err: error }, 'store: cannot read the cluster state yet'));
    // The first claim is usually answered while the standby read runs: a leader by now loads first too.
    if (leadership.isLeader()) await term.whenLoaded();
    publisher.open();
    loop.start();
  }

  /** Flushes what the store has not seen and closes agent streams; the lease is kept until {@link release} (after the gRPC port closed). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const { term, loop, leadership, persister, commands } = this.parts;
    term.stop();
    await loop.stop();
    if (leadership.isLeader()) await persister.flush();
    commands.closeAll('shutdown');
  }

  /** Gives up the lease (after {@link stop}). */
  async release(): Promise<void> {
    await this.stop();
    await this.parts.leadership.stop();
  }
}
