import type { Model } from '@llmgw/domain';
import type { AgentCommands, CloseReason, CollectReply, ReplyHandler, StartOrder } from '../nodes/agent-commands.port';
import type { AgentSessions } from './agent.sessions';
import { collectReplyFromProto, fetchWeightsToProto, startReplicaToProto } from './proto.mapper';

/**
 * {@link AgentCommands} on the agents' gRPC streams: builds each wire command (proto.mapper.ts)
 * and sends it on the node's session (agent.sessions.ts), which fills in the command id and
 * matches the agent's CommandResult to it.
 */
export class GrpcAgentCommands implements AgentCommands {
  constructor(private readonly sessions: AgentSessions) {}

  startReplica(nodeId: string, order: StartOrder, onReply?: ReplyHandler): boolean {
    const { commandId: _id, ...value } = startReplicaToProto('', order.replicaId, order.model, order.profileIndex, order.member, order.members, (id) => order.addressOf(id));
    return this.sessions.send(nodeId, { $case: 'startReplica', value }, onReply) !== undefined;
  }

  stopReplica(nodeId: string, replicaId: string): boolean {
    return this.sessions.send(nodeId, { $case: 'stopReplica', value: { replicaId } }) !== undefined;
  }

  fetchWeights(nodeId: string, model: Model, onReply: ReplyHandler): boolean {
    const fetch = fetchWeightsToProto('', model);
    if (!fetch) return false;
    const { commandId: _id, ...value } = fetch;
    this.sessions.send(nodeId, { $case: 'fetchWeights', value }, onReply);
    return true;
  }

  async collectWeights(nodeId: string, paths: readonly string[], deadlineMs: number): Promise<CollectReply> {
    return collectReplyFromProto(await this.sessions.request(nodeId, { $case: 'collectWeights', value: { paths: [...paths] } }, deadlineMs));
  }

  connected(nodeId: string): boolean {
    return this.sessions.get(nodeId) !== undefined;
  }

  closeAll(reason: CloseReason): void {
    this.sessions.closeAll(reason === 'not-leader' ? { $case: 'notLeader', value: {} } : undefined);
  }
}
