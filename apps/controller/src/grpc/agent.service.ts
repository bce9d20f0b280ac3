import type { ServerDuplexStream } from '@grpc/grpc-js';
import { DomainError, ErrorCode, GRPC_STATUS_OF } from '@llmgw/domain';
import type { ConnectRequest, ConnectResponse } from '@llmgw/proto';
import type { Logger } from 'pino';
import type { NodeAuthentication } from '../nodes/node-credential.service';
import type { NodeHeartbeat, NodeRegistration } from '@llmgw/control';
import { AgentSession, type AgentSessions } from './agent.sessions';
import { assertClaimMatchesCertificate } from './grpc-auth';
import { grpcStatusOf } from './grpc-errors';
import {
  heartbeatFromProto,
  registrationFromProto,
  replicaStatusFromProto,
  unheardFailureFromProto,
  type ReplicaStatusReport,
  type UnheardFailureReport,
} from './proto.mapper';

/** Whether this controller takes agents now, and where the leader is when it does not. */
export type Admission = { readonly leader: true } | { readonly leader: false; readonly leaderAddress?: string };

/** What the agent streams feed (AgentReportsHandler implements it). Everything arrives in domain form. */
export interface AgentStreamHandler {
  /** Waits until the state is loaded; says whether this controller leads. */
  admit(): Promise<Admission>;
  /** Whether this controller still leads with its state loaded, at this instant (asked right before a stream is kept). */
  leads(): boolean;
  /** Welcome's fields. */
  readonly controllerId: string;
  readonly heartbeatIntervalMs: number;
  /** Checks the node secret against the one bound to the id (binding a new one at a first join); may reject when the store cannot answer. */
  authenticate(nodeId: string, secret: string | undefined): Promise<NodeAuthentication>;
  /** Undoes the binding to a secret `authenticate` just issued, when no Welcome will carry it (the stream went away, or the lead did). */
  releaseSecret(nodeId: string, issued: string): Promise<void>;
  /** The node's stream is open and welcomed (it replaced an older one of the node's, if any). */
  registered(registration: NodeRegistration): void;
  /** Engine failures on the node that happened while no leader listened. */
  unheardFailures(nodeId: string, failures: readonly UnheardFailureReport[]): void;
  heartbeat(nodeId: string, heartbeat: NodeHeartbeat): void;
  replicaStatus(nodeId: string, status: ReplicaStatusReport): void;
  /** The node's stream ended (not called when a newer stream of the node had replaced it). */
  disconnected(nodeId: string): void;
}

/** Injection token of the {@link AgentStreamHandler} the agent streams feed. */
export const AGENT_STREAM_HANDLER = Symbol('llmgw.controller.agent-stream-handler');

/**
 * `AgentService.Connect` (the join token was checked before the call got here: grpc-auth.ts):
 * waits for Register, answers a standby's NotLeader, or (as leader) checks the node secret bound
 * to the node id and, with mutual TLS, that the client certificate names that node, and answers
 * Welcome (carrying a new secret at the node's first join), then feeds every message to the
 * handler in arrival order. If the lead was lost while the store checked the identity, the stream
 * gets NotLeader instead of Welcome (a secret just issued is released), as the others did then. A wrong or missing node secret for a bound id ends the stream with
 * PERMISSION_DENIED before anything about the node changes, so a live session is never replaced
 * by another agent; the same agent reconnecting replaces its older stream. A message that cannot
 * be used ends the stream with INVALID_ARGUMENT naming the field. Every status comes from
 * grpcStatusOf.
 */
export class AgentConnect {
  private readonly log: Logger;

  constructor(
    private readonly handler: AgentStreamHandler,
    private readonly sessions: Pick<AgentSessions, 'attach' | 'detach'>,
    logger: Logger,
  ) {
    this.log = logger.child({ context: 'AgentService' });
  }

  connect(call: ServerDuplexStream<ConnectRequest, ConnectResponse>): void {
    const { handler, log } = this;
    const peer = call.getPeer();
    let session: AgentSession | undefined;
    let failed = false;
    // Messages are handled one after another, even while Register waits for admission.
    let queue: Promise<void> = Promise.resolve();
    const fail = (error: unknown): void => {
      if (failed) return;
      failed = true;
      const answer = grpcStatusOf(error);
      if (answer.code === GRPC_STATUS_OF[ErrorCode.Internal]) log.error({ err: error, nodeId: session?.nodeId }, 'agent message failed');
      else log.warn({ peer, nodeId: session?.nodeId, details: answer.details }, 'agent stream refused');
      call.emit('error', answer);
    };
    const invalid = (details: string): DomainError => new DomainError(ErrorCode.InvalidArgument, details);
    const gone = (): boolean => failed || call.cancelled || call.destroyed;
    const handle = async (req: ConnectRequest): Promise<void> => {
      if (failed) return;
      const p = req.payload;
      if (!session) {
        if (p?.$case !== 'register') return fail(invalid('the first message must be Register'));
        const registration = registrationFromProto(p.value);
        const admission = await handler.admit();
        if (!admission.leader) {
          log.info({ peer, nodeId: registration.id, leader: admission.leaderAddress }, 'not the leader: agent sent elsewhere');
          call.write({ payload: { $case: 'notLeader', value: admission.leaderAddress ? { leaderAddress: admission.leaderAddress } : {} } });
          call.end();
          failed = true;
          return;
        }
        // The agent gave up while admission waited (its Welcome timeout): bind nothing for a stream nobody reads.
        if (gone()) return;
        assertClaimMatchesCertificate(call, registration.id, 'node id');
        let auth: NodeAuthentication;
        try {
          auth = await handler.authenticate(registration.id, p.value.nodeSecret);
        } catch (error) {
          log.warn({ err: error, peer, nodeId: registration.id }, 'cannot check the node identity now');
          return fail(new DomainError(ErrorCode.Unavailable, 'the controller cannot check the node identity now; retry'));
        }
        if (!auth.ok) {
          log.warn({ peer, nodeId: registration.id, address: registration.address }, 'agent refused: node id bound to another agent');
          return fail(new DomainError(ErrorCode.PermissionDenied, auth.reason));
        }
        if (gone()) {
          // A secret issued to a stream that is gone would reach no one and lock the id out.
          if (auth.issued !== undefined) await handler.releaseSecret(registration.id, auth.issued);
          log.info({ peer, nodeId: registration.id }, 'agent stream closed before its Welcome; nothing kept');
          return;
        }
        if (!handler.leads()) {
          // Leadership ended while the identity was checked, and the streams it had were closed
          // then: one kept now would stay on a controller that commands nobody, while the leader
          // counts the node as lost. No Welcome either: on one the agent hands over the engine
          // failures it holds, which a controller that no longer leads would drop.
          if (auth.issued !== undefined) await handler.releaseSecret(registration.id, auth.issued);
          log.info({ peer, nodeId: registration.id }, 'leadership ended during the identity check: agent sent elsewhere');
          call.write({ payload: { $case: 'notLeader', value: {} } });
          call.end();
          failed = true;
          return;
        }
        if (auth.issued !== undefined) log.info({ peer, nodeId: registration.id }, 'node id bound to a new node secret');
        const welcome = { heartbeatIntervalMs: handler.heartbeatIntervalMs, controllerId: handler.controllerId, ...(auth.issued !== undefined ? { nodeSecret: auth.issued } : {}) };
        call.write({ payload: { $case: 'welcome', value: welcome } });
        session = new AgentSession(registration.id, call);
        this.sessions.attach(session);
        handler.registered(registration);
        return;
      }
      switch (p?.$case) {
        case 'register':
          return fail(invalid('Register may only be the first message'));
        case 'heartbeat':
          return handler.heartbeat(session.nodeId, heartbeatFromProto(p.value));
        case 'replicaStatus':
          return handler.replicaStatus(session.nodeId, replicaStatusFromProto(p.value));
        case 'commandResult':
          return session.result(p.value);
        case 'unheardFailures':
          return handler.unheardFailures(session.nodeId, p.value.failures.map(unheardFailureFromProto));
        default:
          return fail(invalid('empty message'));
      }
    };
    call.on('data', (req: ConnectRequest) => {
      queue = queue.then(() => handle(req)).catch(fail);
    });
    const closed = (): void => {
      queue = queue.then(() => {
        if (!session) return;
        const s = session;
        session = undefined;
        s.close();
        if (this.sessions.detach(s)) handler.disconnected(s.nodeId);
      });
    };
    call.on('end', closed);
    call.on('error', closed);
    call.on('cancelled', closed);
    call.on('close', closed);
  }
}
