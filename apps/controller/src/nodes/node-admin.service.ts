import type { NodeEntry } from '@llmgw/control';
import { DomainError, ErrorCode } from '@llmgw/domain';
import type { NodeRepository } from '@llmgw/store';
import type { Logger } from 'pino';
import type { AgentCommands } from './agent-commands.port';
import type { NodeIdentities } from './node-identity.service';
import { nodeRecordOf, type NodeRegistry } from './node.registry';
import type { RecordEvent } from '../store/event.recorder';
import type { StatePersister } from '../store/state.persister';

/** What the operator's node commands act on (narrow ports; node admin owns none of them). */
export interface NodeAdminDeps {
  readonly nodes: Pick<NodeRegistry, 'get' | 'remove' | 'setCordoned'>;
  readonly store: { readonly nodes: Pick<NodeRepository, 'remove' | 'upsert' | 'setCordoned'> };
  readonly commands: Pick<AgentCommands, 'connected'>;
  readonly identities: Pick<NodeIdentities, 'isForgetting' | 'forget'>;
  readonly persister: Pick<StatePersister, 'idle'>;
  /** Capacity may have appeared (see Reconciler.capacityChanged). */
  capacityChanged(): void;
  /** A reconcile pass soon. */
  requestPass(): void;
  readonly recordEvent: RecordEvent;
  /** Whether this controller still leads (TermService.leads). */
  leads(): boolean;
}

/** The operator's node commands: cordon, drain, uncordon and forget. Leader only (the admin service checks). */
export class NodeAdminService {
  private readonly log: Logger;

  constructor(
    private readonly deps: NodeAdminDeps,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'ControlPlane' });
  }

  /**
   * Removes a lost node: its stored record and the credential bound to its id, so that a
   * re-installed machine can join under the same id again. A node that is not lost (or still
   * has an agent stream) is a `conflict`: forgetting it would let another agent take the id of a
   * live node. Throws `not_found` for an unknown node.
   */
  async forgetNode(nodeId: string): Promise<void> {
    const { nodes, commands, identities } = this.deps;
    const entry = nodes.get(nodeId);
    if (!entry) throw new DomainError(ErrorCode.NotFound, `node '${nodeId}' is not known`);
    if (entry.info.state !== 'lost' || entry.connected || commands.connected(nodeId)) {
      throw new DomainError(
        ErrorCode.Conflict,
        `node '${nodeId}' is ${entry.info.state}${entry.connected ? ' and connected' : ''}: only a lost node can be forgotten (stop its agent and wait until the node is lost)`,
        [{ path: 'node', message: `is ${entry.info.state}, not lost` }],
      );
    }
    if (identities.isForgetting(nodeId)) throw new DomainError(ErrorCode.Conflict, `node '${nodeId}' is being forgotten already`);
    await identities.forget(nodeId, async () => {
      // A flush that took this node's record before the forget began would write it back after
      // the removal; later flushes skip it while it is being forgotten.
      await this.deps.persister.idle();
      // The wait is long exactly when the store is slow, which is when a lead is lost: the node
      // may be back with the new leader by now, and its credential must stay.
      if (!this.deps.leads()) throw new DomainError(ErrorCode.Unavailable, `the lead moved before node '${nodeId}' was forgotten; nothing was removed; send it again to the leader`);
      await this.deps.store.nodes.remove(nodeId);
    });
    nodes.remove(nodeId);
    this.deps.recordEvent({ kind: 'forgotten', nodeId, reason: 'operator: nodes forget' });
    this.log.info({ nodeId }, 'node forgotten: its record and node secret are removed');
  }

  /**
   * Cordons (no new replicas), drains (cordon, then move its replicas elsewhere, each stopped
   * once its replacement is ready) or uncordons a node. Throws `not_found` for an unknown node.
   */
  async setCordon(nodeId: string, action: 'cordon' | 'uncordon' | 'drain'): Promise<NodeEntry> {
    const cordoned = action !== 'uncordon';
    const draining = action === 'drain';
    const { nodes, store } = this.deps;
    const entry = nodes.get(nodeId);
    if (!entry) throw new DomainError(ErrorCode.NotFound, `node '${nodeId}' is not known`);
    // The row may not be written yet (a node that just joined): insert it, then set the flags.
    // Both are stored, so a restarted or new leader carries a drain on.
    await store.nodes.upsert({ ...nodeRecordOf(entry), cordoned });
    await store.nodes.setCordoned(nodeId, cordoned, draining);
    nodes.setCordoned(nodeId, cordoned, draining);
    this.deps.recordEvent({ kind: cordoned ? 'cordoned' : 'uncordoned', nodeId, reason: action });
    this.log.info({ nodeId, action }, 'node ' + (action === 'drain' ? 'draining' : `${action}ed`));
    if (!cordoned) this.deps.capacityChanged();
    this.deps.requestPass();
    return nodes.get(nodeId) as NodeEntry;
  }
}
