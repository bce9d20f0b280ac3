import {
  DomainError,
  type Clock,
  ErrorCode,
  type GcCollectNodeResult,
  type GcCollectView,
  type GcPlanView,
  type NodeView,
  type ReplicaView,
  type StatusView,
} from '@llmgw/domain';
import type { EventQuery, EventRepository, StoredEvent } from '@llmgw/store';
import { gcPlan, type NodeEntry } from '@llmgw/control';
import type { CatalogReloader } from '../catalog/catalog.reloader';
import type { LeadershipService } from '../leadership/leadership.service';
import type { TermService } from '../leadership/term.service';
import type { AgentCommands } from '../nodes/agent-commands.port';
import type { NodeRegistry } from '../nodes/node.registry';
import type { EndpointPublisher } from '../publishing/endpoint.publisher';
import type { Reconciler } from '../reconcile/replica.reconciler';
import type { ReplicaRegistry } from '../replicas/replica.registry';
import { nodeView, replicaView, statusView, type AdminState } from './admin.views';

/** The operator's node commands the admin API forwards (NodeAdminService implements them). */
export interface NodeAdmin {
  /** Removes a lost node's record and credential. */
  forgetNode(nodeId: string): Promise<void>;
  /** Cordons, drains or uncordons a node; resolves with it as it is then. */
  setCordon(nodeId: string, action: 'cordon' | 'uncordon' | 'drain'): Promise<NodeEntry>;
}

/** Injection token of {@link NodeAdmin}. */
export const NODE_ADMIN = Symbol('llmgw.controller.node-admin');

/** What the admin API reads and acts through (narrow ports; it owns none of them). */
export interface AdminDeps {
  readonly clock: Clock;
  readonly nodes: Pick<NodeRegistry, 'snapshot' | 'get'>;
  readonly replicas: Pick<ReplicaRegistry, 'snapshot'>;
  readonly catalog: Pick<CatalogReloader, 'current' | 'rejected'>;
  readonly reconciler: Pick<Reconciler, 'unplaceable' | 'lastPass' | 'lastActivePass'>;
  readonly leadership: Pick<LeadershipService, 'isLeader' | 'leaderElsewhere' | 'ownerId'>;
  readonly term: Pick<TermService, 'phase' | 'leads'>;
  readonly publisher: Pick<EndpointPublisher, 'current'>;
  readonly nodeAdmin: NodeAdmin;
  readonly commands: Pick<AgentCommands, 'collectWeights'>;
  readonly events: Pick<EventRepository, 'list'>;
  /** How long `collect` waits for each agent's answer, ms. */
  readonly commandTimeoutMs: number;
}

/** The admin API's operations over the control plane. Reads work on any controller; changes need the leader. */
export class AdminService {
  constructor(private readonly deps: AdminDeps) {}

  private state(): AdminState {
    const current = this.deps.catalog.current();
    return {
      now: this.deps.clock.now(),
      nodes: this.deps.nodes.snapshot(),
      replicas: this.deps.replicas.snapshot(),
      ...(current ? { catalog: current.catalog } : {}),
      unplaceable: this.deps.reconciler.unplaceable,
    };
  }

  async status(): Promise<StatusView> {
    const leader = this.deps.leadership.isLeader();
    // A standby names a leader only while it is still renewing its claim (never a dead one).
    const leaderAddress = leader ? undefined : await this.deps.leadership.leaderElsewhere().catch(() => undefined);
    const catalog = this.deps.catalog.current();
    const rejected = this.deps.catalog.rejected();
    const snapshot = this.deps.publisher.current();
    return statusView(this.state(), {
      id: this.deps.leadership.ownerId,
      leader,
      phase: this.deps.term.phase,
      ...(leaderAddress !== undefined ? { leaderAddress } : {}),
      ...(catalog ? { catalogRevision: catalog.revision } : {}),
      ...(rejected ? { rejectedCatalogRevision: rejected.revision } : {}),
      ...(snapshot ? { snapshotRevision: snapshot.revision } : {}),
      ...(this.deps.reconciler.lastPass ? { lastPass: { ...this.deps.reconciler.lastPass } } : {}),
      ...(this.deps.reconciler.lastActivePass ? { lastActivePass: { ...this.deps.reconciler.lastActivePass } } : {}),
    });
  }

  nodes(): NodeView[] {
    const s = this.state();
    return [...s.nodes.keys()].sort().map((id) => nodeView(s.nodes.get(id) as NodeEntryOf<typeof s>, s.replicas));
  }

  replicas(model?: string): ReplicaView[] {
    const s = this.state();
    return [...s.replicas.values()]
      .filter((e) => model === undefined || e.replica.model === model)
      .sort((a, b) => (a.replica.id < b.replica.id ? -1 : 1))
      .map((e) => replicaView(e, s.nodes, s.now));
  }

  listEvents(query: EventQuery): Promise<StoredEvent[]> {
    return this.deps.events.list(query);
  }

  gc(): GcPlanView {
    const current = this.deps.catalog.current();
    return gcPlan(this.deps.nodes.snapshot(), current?.catalog, current?.revision ?? 0);
  }

  /**
   * Asks the named nodes (or, with `all`, every node) that have something to collect to remove
   * it, and waits for each agent's per-path answer until the command deadline. A node id the
   * controller does not know is a NotFound before anything is sent to any node. Agents re-check
   * every path and decide for themselves; a refusal is reported, not retried.
   */
  async collect(scope: { nodes: readonly string[] } | { all: true }): Promise<GcCollectView> {
    this.requireLeader();
    const wanted = 'nodes' in scope ? new Set(scope.nodes) : undefined;
    const unknown = [...(wanted ?? [])].filter((id) => !this.deps.nodes.get(id));
    if (unknown.length > 0) {
      throw new DomainError(
        ErrorCode.NotFound,
        `${unknown.length === 1 ? 'node' : 'nodes'} ${unknown.map((id) => `'${id}'`).join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not known; nothing was collected`,
        unknown.map((id) => ({ path: 'nodes', message: `node '${id}' is not known` })),
      );
    }
    const plan = this.gc();
    const targets = plan.nodes.filter((n) => !wanted || wanted.has(n.nodeId));
    const nodes = await Promise.all(
      targets.map(async (n): Promise<GcCollectNodeResult> => {
        const asked = n.entries.map((e) => e.name);
        const result = await this.deps.commands.collectWeights(n.nodeId, asked, this.deps.commandTimeoutMs);
        if (result.paths.length === 0 && !result.ok) return { nodeId: n.nodeId, asked, error: result.message || 'the agent refused the command' };
        return {
          nodeId: n.nodeId,
          asked,
          results: result.paths.map((p) => ({ path: p.path, outcome: p.outcome, ...(p.reason !== undefined ? { reason: p.reason } : {}) })),
        };
      }),
    );
    let removedBytes = 0;
    for (const r of nodes) {
      const sizes = new Map((targets.find((t) => t.nodeId === r.nodeId)?.entries ?? []).map((e) => [e.name, e.sizeBytes]));
      for (const p of r.results ?? []) if (p.outcome === 'removed') removedBytes += sizes.get(p.path) ?? 0;
    }
    return { catalogRevision: plan.catalogRevision, nodes, removedBytes };
  }

  async cordon(nodeId: string, action: 'cordon' | 'uncordon' | 'drain'): Promise<NodeView> {
    this.requireLeader();
    if (!this.deps.nodes.get(nodeId)) throw new DomainError(ErrorCode.NotFound, `node '${nodeId}' is not known`);
    const entry = await this.deps.nodeAdmin.setCordon(nodeId, action);
    // Stored, but a leader that took over meanwhile loaded the nodes before it and will not
    // read them again: only the leader's memory acts on a cordon or drain.
    if (!this.deps.term.leads()) throw new DomainError(ErrorCode.Unavailable, `the lead moved while '${action}' was stored; send it again to the leader`);
    return nodeView(entry, this.deps.replicas.snapshot());
  }

  /** `nodes forget`: removes a lost node and its credential (see NodeAdminService.forgetNode). */
  async forget(nodeId: string): Promise<void> {
    this.requireLeader();
    await this.deps.nodeAdmin.forgetNode(nodeId);
  }

  private requireLeader(): void {
    if (!this.deps.leadership.isLeader()) {
      throw new DomainError(ErrorCode.Unavailable, 'this controller is a standby; send changes to the leader (see /v1/admin/status controller.leaderAddress)');
    }
    // A change made while the new term loads the store would be overwritten by what it read.
    if (!this.deps.term.leads()) throw new DomainError(ErrorCode.Unavailable, 'this controller is taking the lead and loading the cluster state; retry in a moment');
  }
}

type NodeEntryOf<S extends AdminState> = S['nodes'] extends ReadonlyMap<string, infer N> ? N : never;
