import {
  DomainError,
  ErrorCode,
  type GcCollectNodeResult,
  type GcCollectView,
  type GcPlanView,
  type NodeView,
  type ReplicaView,
  type StatusView,
} from '@llmgw/domain';
import type { EventQuery, EventRepository, StoredEvent } from '@llmgw/store';
import type { ControlPlane } from '../control-plane.service';
import { gcPlan } from '@llmgw/control';
import type { AgentCommands } from '../nodes/agent-commands.port';
import { nodeView, replicaView, statusView, type AdminState } from './admin.views';

/** The admin API's operations over the control plane. Reads work on any controller; changes need the leader. */
export class AdminService {
  constructor(
    private readonly plane: ControlPlane,
    private readonly commands: Pick<AgentCommands, 'collectWeights'>,
    private readonly events: Pick<EventRepository, 'list'>,
    private readonly commandTimeoutMs: number,
  ) {}

  private state(): AdminState {
    const current = this.plane.currentCatalog();
    return {
      now: this.plane.clock.now(),
      nodes: this.plane.nodes.snapshot(),
      replicas: this.plane.replicas.snapshot(),
      ...(current ? { catalog: current.catalog } : {}),
      unplaceable: this.plane.reconciler.unplaceable,
    };
  }

  async status(): Promise<StatusView> {
    const leader = this.plane.leadership.isLeader();
    // A standby names a leader only while it is still renewing its claim (never a dead one).
    const leaderAddress = leader ? undefined : await this.plane.leadership.leaderElsewhere().catch(() => undefined);
    const catalog = this.plane.currentCatalog();
    const rejected = this.plane.catalog.rejected();
    const snapshot = this.plane.publisher.current();
    return statusView(this.state(), {
      id: this.plane.controllerId,
      leader,
      phase: this.plane.phase,
      ...(leaderAddress !== undefined ? { leaderAddress } : {}),
      ...(catalog ? { catalogRevision: catalog.revision } : {}),
      ...(rejected ? { rejectedCatalogRevision: rejected.revision } : {}),
      ...(snapshot ? { snapshotRevision: snapshot.revision } : {}),
      ...(this.plane.reconciler.lastPass ? { lastPass: { ...this.plane.reconciler.lastPass } } : {}),
      ...(this.plane.reconciler.lastActivePass ? { lastActivePass: { ...this.plane.reconciler.lastActivePass } } : {}),
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
    return this.events.list(query);
  }

  gc(): GcPlanView {
    const current = this.plane.currentCatalog();
    return gcPlan(this.plane.nodes.snapshot(), current?.catalog, current?.revision ?? 0);
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
    const unknown = [...(wanted ?? [])].filter((id) => !this.plane.nodes.get(id));
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
        const result = await this.commands.collectWeights(n.nodeId, asked, this.commandTimeoutMs);
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
    if (!this.plane.nodes.get(nodeId)) throw new DomainError(ErrorCode.NotFound, `node '${nodeId}' is not known`);
    const entry = await this.plane.setCordon(nodeId, action);
    return nodeView(entry, this.plane.replicas.snapshot());
  }

  /** `nodes forget`: removes a lost node and its credential (see ControlPlane.forgetNode). */
  async forget(nodeId: string): Promise<void> {
    this.requireLeader();
    await this.plane.forgetNode(nodeId);
  }

  private requireLeader(): void {
    if (!this.plane.leadership.isLeader()) {
      throw new DomainError(ErrorCode.Unavailable, 'this controller is a standby; send changes to the leader (see /v1/admin/status controller.leaderAddress)');
    }
  }
}

type NodeEntryOf<S extends AdminState> = S['nodes'] extends ReadonlyMap<string, infer N> ? N : never;
