import { timerScheduler, type Scheduler } from '@llmgw/domain';
// ControllerConnection in process against fake controllers over real gRPC: the reconnect
// schedule (what delay follows what), a controller that never answers, and the stream protocol.
import { SeededRng, testGrpcTlsEnv, waitFor } from '@llmgw/testing';
import type { Heartbeat, Register } from '@llmgw/proto';
import { afterEach, describe, expect, it } from 'vitest';
import { SILENT_LOGGER } from '../runtime/agent.logger';
import { FakeController } from '../runtime/test/fake-controller.harness';
import { controllerClientFactory } from './controller.clients';
import { ControllerConnection, type AgentSession, type ConnectionSettings, type ControllerCommand } from './controller.connection';

const REGISTER: Register = { nodeId: 'n-1', address: '127.0.0.1', labels: {}, gpus: [], cpuCores: 2, memoryBytes: 1, replicas: [], agentVersion: '' };

class StubSession implements AgentSession {
  readonly commands: ControllerCommand[] = [];
  async register(): Promise<Register> {
    return REGISTER;
  }
  async heartbeat(): Promise<Heartbeat> {
    return { gpus: [], replicas: [] };
  }
  handle(command: ControllerCommand): void {
    this.commands.push(command);
  }
}

/** Real timers, with every reconnect delay recorded (heartbeat and welcome timers pass through). */
class RecordingTimers implements Scheduler {
  readonly delays: number[] = [];
  schedule(ms: number, fn: () => void): () => void {
    this.delays.push(ms);
    return timerScheduler.schedule(ms, fn);
  }
}

describe('ControllerConnection (in process, real gRPC)', () => {
  // TLS to the fake controllers, trusting the test CA, as the agent's own client factory builds it.
  const tlsClients = controllerClientFactory({ insecure: false, caFile: testGrpcTlsEnv().LLMGW_GRPC_TLS_CA, clientAuth: false, refreshMs: 60_000 });
  const controllers: FakeController[] = [];
  const connections: ControllerConnection[] = [];
  afterEach(async () => {
    connections.splice(0).forEach((c) => c.stop());
    await Promise.all(controllers.splice(0).map((c) => c.stop()));
  });

  function connect(settings: Partial<ConnectionSettings> & Pick<ConnectionSettings, 'controllers'>, timers?: Scheduler, session = new StubSession()): ControllerConnection {
    const connection = new ControllerConnection(
      { reconnect: { minMs: 40, maxMs: 400 }, defaultHeartbeatMs: 1_000, welcomeTimeoutMs: 5_000, ...settings },
      { session, logger: SILENT_LOGGER, rng: new SeededRng(1), ...(timers && { scheduler: timers }), onFatal: () => undefined, createClient: tlsClients },
    );
    connections.push(connection);
    connection.start();
    return connection;
  }

  it('two standbys naming each other: a redirect is followed at once, and the loop pauses between rounds without growing', async () => {
    const a = await FakeController.start({ kind: 'not-leader' });
    const b = await FakeController.start({ kind: 'not-leader', leaderAddress: a.address });
    a.mode = { kind: 'not-leader', leaderAddress: b.address };
    controllers.push(a, b);
    const timers = new RecordingTimers();
    connect({ controllers: [a.address] }, timers);
    await waitFor(() => a.registers.length + b.registers.length >= 8, { deadlineMs: 20_000, message: 'eight Registers' });
    // Reconnect delays only: welcome timers are 5000.
    const reconnects = timers.delays.filter((d) => d !== 5_000);
    expect(reconnects[0]).toBe(0);
    const pauses = reconnects.filter((d) => d > 0);
    expect(pauses.length).toBeGreaterThanOrEqual(3);
    for (const d of pauses) expect(d).toBeGreaterThanOrEqual(20);
    for (const d of pauses) expect(d).toBeLessThanOrEqual(40);
  });

  it('a dead leader and a standby that knows no leader: NotLeader never grows the delay, and the new leader is joined on the next attempt', async () => {
    const dead = await FakeController.start({ kind: 'leader', heartbeatIntervalMs: 100 });
    const deadAddress = dead.address;
    await dead.stop();
    const standby = await FakeController.start({ kind: 'not-leader' });
    controllers.push(standby);
    const timers = new RecordingTimers();
    const connection = connect({ controllers: [deadAddress, standby.address] }, timers);
    // Long enough for a backoff that counted NotLeader as failures to pass its maximum (400 ms).
    await waitFor(() => standby.registers.length >= 12, { deadlineMs: 20_000, message: 'twelve NotLeader answers' });
    const reconnects = timers.delays.filter((d) => d !== 5_000);
    expect(Math.max(...reconnects)).toBeLessThanOrEqual(40);
    // The standby takes over: the agent's next attempt at it is welcomed.
    const seen = standby.registers.length;
    standby.mode = { kind: 'leader', heartbeatIntervalMs: 100 };
    await waitFor(() => connection.connected, { deadlineMs: 10_000, message: 'welcomed by the new leader' });
    expect(standby.registers.length).toBeLessThanOrEqual(seen + 2);
  });

  it('a controller that accepts the stream but never welcomes is dropped after the timeout and the next one tried', async () => {
    const silent = await FakeController.start({ kind: 'silent' });
    const leader = await FakeController.start({ kind: 'leader', heartbeatIntervalMs: 100 });
    controllers.push(silent, leader);
    const connection = connect({ controllers: [silent.address, leader.address], welcomeTimeoutMs: 2_000 });
    await waitFor(() => leader.heartbeats.length >= 2, { deadlineMs: 20_000, message: 'heartbeats at the leader' });
    expect(silent.registers).toHaveLength(1);
    expect(connection.connected).toBe(true);
  });

  it('commands are handed to the session; a lost leader is reconnected to and registered with again', async () => {
    const leader = await FakeController.start({ kind: 'leader', heartbeatIntervalMs: 100 });
    controllers.push(leader);
    const session = new StubSession();
    connect({ controllers: [leader.address] }, undefined, session);
    await waitFor(() => leader.registers.length === 1, { deadlineMs: 10_000, message: 'Register' });
    leader.send({ $case: 'stopReplica', value: { commandId: '', replicaId: 'r-1' } });
    await waitFor(() => session.commands.length === 1, { message: 'command handled' });
    expect(session.commands[0]).toMatchObject({ $case: 'stopReplica', value: { replicaId: 'r-1', commandId: 'cmd-1' } });

    // The controller ends every stream it holds; the agent comes back with a fresh Register.
    leader.dropStreams();
    await waitFor(() => leader.registers.length === 2, { deadlineMs: 10_000, message: 'second Register' });
  });
});
