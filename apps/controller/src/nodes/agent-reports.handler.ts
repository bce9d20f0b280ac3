import type { NodeHeartbeat, NodeRegistration, ReplicaEntry, ReportedReplica } from '@llmgw/control';
import type { Clock } from '@llmgw/domain';
import type { Logger } from 'pino';
import type { CatalogReloader } from '../catalog/catalog.reloader';
import type { Admission, AgentStreamHandler } from '../grpc/agent.service';
import type { ReplicaStatusReport, UnheardFailureReport } from '../grpc/proto.mapper';
import type { LeadershipService } from '../leadership/leadership.service';
import type { TermService } from '../leadership/term.service';
import type { Reconciler } from '../reconcile/replica.reconciler';
import type { ReplicaRegistry } from '../replicas/replica.registry';
import type { RecordEvent } from '../store/event.recorder';
import type { NodeAuthentication } from './node-credential.service';
import type { NodeIdentities } from './node-identity.service';
import type { NodeRegistry } from './node.registry';

/** What agent reports are folded into (narrow ports; the handler owns none of them). */
export interface AgentReportsDeps {
  readonly clock: Clock;
  /** Welcome's heartbeat interval, ms. */
  readonly heartbeatIntervalMs: number;
  readonly leadership: Pick<LeadershipService, 'isLeader' | 'ownerId'>;
  readonly term: Pick<TermService, 'phase' | 'admit' | 'leads' | 'checkSettled'>;
  readonly identities: Pick<NodeIdentities, 'authenticate' | 'releaseSecret'>;
  readonly nodes: Pick<NodeRegistry, 'get' | 'register' | 'heartbeat' | 'replicaChanged' | 'disconnected'>;
  readonly replicas: Pick<ReplicaRegistry, 'get' | 'add' | 'update' | 'report'>;
  readonly catalog: Pick<CatalogReloader, 'current'>;
  readonly reconciler: Pick<Reconciler, 'rendezvousKnown'>;
  /** A reconcile pass soon. */
  requestPass(): void;
  readonly recordEvent: RecordEvent;
}

/**
 * What agents report, in domain form (the gRPC edge decodes it: agent.service.ts): registration,
 * heartbeats, replica status, engine failures no leader heard and stream ends go into the node
 * and replica registries; while settling, replicas the store did not know are adopted.
 */
export class AgentReportsHandler implements AgentStreamHandler {
  private readonly log: Logger;

  constructor(
    private readonly deps: AgentReportsDeps,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'ControlPlane' });
  }

  get controllerId(): string {
    return this.deps.leadership.ownerId;
  }

  get heartbeatIntervalMs(): number {
    return this.deps.heartbeatIntervalMs;
  }

  admit(): Promise<Admission> {
    return this.deps.term.admit();
  }

  leads(): boolean {
    return this.deps.term.leads();
  }

  /** Checks a Register's node secret (see NodeIdentities.authenticate). */
  authenticate(nodeId: string, secret: string | undefined): Promise<NodeAuthentication> {
    return this.deps.identities.authenticate(nodeId, secret);
  }

  releaseSecret(nodeId: string, issued: string): Promise<void> {
    return this.deps.identities.releaseSecret(nodeId, issued);
  }

  registered(registration: NodeRegistration): void {
    const previous = this.deps.nodes.get(registration.id);
    this.deps.nodes.register(registration, this.deps.clock.now());
    this.log.info(
      { nodeId: registration.id, address: registration.address, gpus: registration.gpus.length, replicas: registration.replicas.length, was: previous?.info.state },
      previous ? 'agent reconnected' : 'node joined',
    );
    for (const r of registration.replicas) this.observe(registration.id, r);
    this.deps.term.checkSettled();
  }

  /**
   * Engine failures an agent could not report while no leader listened (each followed by the
   * agent's own restart unless it gave up): each becomes a `failed` event at the time it
   * happened, and counts as a restart of its replica, as a failure seen live does. The replica's
   * state is not touched: Register says how it stands now.
   */
  unheardFailures(nodeId: string, unheard: readonly UnheardFailureReport[]): void {
    if (unheard.length === 0) return;
    const now = this.deps.clock.now();
    const perReplica = new Map<string, number>();
    for (const u of unheard) {
      const { replicaId, reason } = u.status;
      const model = this.deps.replicas.get(replicaId)?.replica.model;
      perReplica.set(replicaId, (perReplica.get(replicaId) ?? 0) + 1);
      this.deps.recordEvent({
        kind: 'failed',
        time: Math.min(u.at, now),
        replicaId,
        nodeId,
        ...(model !== undefined ? { model } : {}),
        reason: `${reason ?? 'engine failed'} (while no leader listened)`,
      });
    }
    for (const [replicaId, n] of perReplica) {
      if (!this.deps.replicas.get(replicaId)) continue;
      this.deps.replicas.update(replicaId, (e) => ({ ...e, dirty: true, replica: { ...e.replica, restarts: e.replica.restarts + n } }));
    }
    this.log.warn({ nodeId, failures: unheard.length, replicas: [...perReplica.keys()] }, 'agent reported engine failures no leader heard');
  }

  heartbeat(nodeId: string, heartbeat: NodeHeartbeat): void {
    const before = this.deps.nodes.get(nodeId)?.reported;
    if (!before || !this.deps.nodes.heartbeat(nodeId, heartbeat, this.deps.clock.now())) return;
    for (const r of heartbeat.replicas) {
      // Most heartbeats repeat what the node already said: fold only what is new to the replica.
      const was = before.get(r.replicaId);
      const known = this.deps.replicas.get(r.replicaId);
      if (was && known && known.memberStates[nodeId] !== undefined && was.state === r.state && was.port === r.port && was.rendezvousPort === r.rendezvousPort && was.reason === r.reason) continue;
      this.observe(nodeId, r);
    }
  }

  replicaStatus(nodeId: string, status: ReplicaStatusReport): void {
    this.deps.nodes.replicaChanged(nodeId, {
      replicaId: status.replicaId,
      state: status.state,
      restarts: status.restarts,
      ...(status.reason !== undefined ? { reason: status.reason } : {}),
      ...(status.port !== undefined ? { port: status.port } : {}),
      ...(status.rendezvousPort !== undefined ? { rendezvousPort: status.rendezvousPort } : {}),
    });
    this.fold(nodeId, status.replicaId, status.state, status.reason, status.port, status.rendezvousPort);
  }

  disconnected(nodeId: string): void {
    this.log.info({ nodeId }, 'agent stream closed');
    this.deps.nodes.disconnected(nodeId);
  }

  /** One replica as an agent reports it: folded into the known replica, or adopted while settling. */
  private observe(nodeId: string, r: ReportedReplica): void {
    const known = this.deps.replicas.get(r.replicaId);
    if (!known && this.deps.term.phase === 'settling' && this.deps.leadership.isLeader()) this.adopt(nodeId, r);
    else if (known && !known.replica.members.some((m) => m.nodeId === nodeId) && !known.persisted && this.deps.term.phase === 'settling') this.adoptMember(nodeId, r);
    this.fold(nodeId, r.replicaId, r.state, r.reason, r.port, r.rendezvousPort);
  }

  private fold(nodeId: string, replicaId: string, state: ReportedReplica['state'], reason: string | undefined, port: number | undefined, rendezvousPort?: number): void {
    const before = this.deps.replicas.get(replicaId);
    if (!before) return;
    const report = { nodeId, state, ...(reason !== undefined ? { reason } : {}), ...(port !== undefined ? { port } : {}), ...(rendezvousPort !== undefined ? { rendezvousPort } : {}) };
    const after = this.deps.replicas.report(replicaId, report, this.deps.clock.now());
    const leaderPort = (e: typeof before): number | undefined => e.replica.members.find((m) => m.rank === 0)?.rendezvousPort;
    // Rank 0 announced (or changed) where the members meet: the others can be started now.
    if (after && leaderPort(after) !== undefined && leaderPort(after) !== leaderPort(before)) this.deps.reconciler.rendezvousKnown(replicaId);
    if (!after || after === before || after.replica.state === before.replica.state) return;
    if (after.replica.state === 'failed') {
      this.log.warn({ replicaId, nodeId, reason: after.replica.reason }, 'replica failed');
      this.deps.recordEvent({ kind: 'failed', model: after.replica.model, replicaId, nodeId, ...(after.replica.reason ? { reason: after.replica.reason } : {}) });
    } else if (after.replica.state === 'ready') {
      this.log.info({ replicaId, nodeId, model: after.replica.model }, 'replica ready');
    }
    if (after.replica.state === 'failed' || after.replica.state === 'stopped') this.deps.requestPass();
  }

  private adopt(nodeId: string, r: ReportedReplica): void {
    if (r.state === 'stopped') return;
    const now = this.deps.clock.now();
    const model = this.deps.catalog.current()?.catalog.get(r.model);
    const profileIndex = Math.max(0, model?.profiles.findIndex((p) => p.engine === r.engine && p.gpusPerNode === r.gpuIndices.length) ?? 0);
    const entry: ReplicaEntry = {
      replica: {
        id: r.replicaId,
        model: r.model,
        profileIndex,
        engine: r.engine,
        members: [{ nodeId, rank: r.rank, gpuIndices: [...r.gpuIndices], ...(r.port !== undefined ? { port: r.port } : {}), ...(r.rendezvousPort !== undefined ? { rendezvousPort: r.rendezvousPort } : {}) }],
        state: 'pending',
        restarts: 0,
        createdAt: now,
        updatedAt: now,
      },
      memberStates: {},
      persisted: false,
      dirty: true,
      fetching: [],
    };
    this.deps.replicas.add(entry);
    this.log.info({ replicaId: r.replicaId, model: r.model, nodeId }, 'adopted a replica the store did not know');
    this.deps.recordEvent({ kind: 'adopted', model: r.model, replicaId: r.replicaId, nodeId, reason: 'reported by its agent while settling' });
  }

  private adoptMember(nodeId: string, r: ReportedReplica): void {
    this.deps.replicas.update(r.replicaId, (e) => ({
      ...e,
      dirty: true,
      replica: {
        ...e.replica,
        members: [...e.replica.members, { nodeId, rank: r.rank, gpuIndices: [...r.gpuIndices], ...(r.port !== undefined ? { port: r.port } : {}), ...(r.rendezvousPort !== undefined ? { rendezvousPort: r.rendezvousPort } : {}) }].sort((a, b) => a.rank - b.rank),
      },
    }));
  }
}
