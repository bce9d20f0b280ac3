import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@llmgw/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SILENT_LOGGER } from '../runtime/agent.logger';
import { EngineRecordRepository } from '../state/engine-record.repository';
import { SourcePolicy } from '../weights/source.policy';
import { DEFAULT_ENGINE_PORTS, pickPortInRange } from './free-port.picker';
import type { ReplicaSnapshot, ReplicaSpec } from './replica.model';
import type { SupervisionSettings } from './replica.supervisor';
import { SupervisorService } from './supervisor.service';

describe('SupervisorService ports of multi-node replicas', () => {
  let root: string;
  let weights: string;
  let service: SupervisorService | undefined;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'llmgw-supervisor-'));
    weights = join(root, 'big.safetensors');
    writeFileSync(weights, 'not read');
  });
  afterEach(async () => {
    if (service) for (const s of service.snapshots()) await service.stop(s.replicaId, 0);
    service?.shutdown();
    service = undefined;
    rmSync(root, { recursive: true, force: true });
  });

  function create(pickPort?: (host: string) => Promise<number>, simulated = true): SupervisorService {
    const settings: SupervisionSettings = {
      readyTimeoutMs: 60_000,
      readyPollMs: 1_000,
      restartLimit: 0,
      restartBackoffMs: 1_000,
      restartBackoffMaxMs: 1_000,
      stableAfterMs: 60_000,
      stopGraceMs: 0,
      livenessPollMs: 1_000,
      liveness: { intervalMs: 60_000, timeoutMs: 1_000, failures: 3 },
      logDir: join(root, 'logs'),
      logRotation: { maxBytes: 1 << 20, files: 1 },
      engineEnv: { PATH: join(root, 'empty-bin') },
      // A process that only stays alive stands in for the engine (its flags are ignored).
      launch: {
        cacheDir: join(root, 'cache'),
        engineHost: '127.0.0.1',
        vllmBinary: 'vllm',
        llamaServerBinary: 'llama-server',
        ...(simulated && { simEngine: { command: process.execPath, args: ['-e', 'setInterval(() => undefined, 1 << 30)'] } }),
      },
    };
    service = new SupervisorService(settings, {
      records: new EngineRecordRepository(join(root, 'state')),
      weights: { ensure: () => Promise.reject(new Error('no fetching in this test')) },
      logger: SILENT_LOGGER,
      now: () => Date.now(),
      policy: new SourcePolicy({ schemes: [], allowNets: [], dirs: [root] }),
      pickPort: pickPort ?? ((host) => pickPortInRange(host, DEFAULT_ENGINE_PORTS, Math.random)),
    });
    return service;
  }

  /** The replica's snapshot once its setup ran (the rendezvous port is announced from then on). */
  function setUp(s: SupervisorService, replicaId: string): Promise<ReplicaSnapshot> {
    return waitFor(() => s.snapshots().find((x) => x.replicaId === replicaId && x.rendezvousPort !== undefined), { deadlineMs: 10_000, message: `${replicaId} announces its rendezvous port` });
  }

  function leaderSpec(replicaId: string, over: Partial<ReplicaSpec> = {}): ReplicaSpec {
    return {
      replicaId,
      model: 'big',
      engine: 'vllm',
      weightsSource: `file://${weights}`,
      cacheName: '',
      servedName: 'big',
      aliases: [],
      gpuIndices: [0, 1],
      rank: 0,
      members: [
        { nodeId: 'a', address: '10.0.0.1', rank: 0 },
        { nodeId: 'b', address: '10.0.0.2', rank: 1 },
      ],
      tensorParallel: 2,
      pipelineParallel: 2,
      engineArgs: [],
      env: {},
      ...over,
    };
  }

  it('a multi-node rank 0 picks its rendezvous port on the node, reports it and rendezvouses at its own address', async () => {
    const s = create();
    expect(await s.start(leaderSpec('r-1'))).toMatchObject({ ok: true });
    const snap = await setUp(s, 'r-1');
    expect(snap.rendezvousPort).not.toBe(6379);
    expect(snap.rendezvousPort).not.toBe(snap.port);
    expect(s.get('r-1')?.spec.leaderAddress).toBe(`10.0.0.1:${snap.rendezvousPort}`);
  });

  it('two multi-node replicas whose rank 0 shares this node get different rendezvous ports, even from a picker that repeats itself', async () => {
    const picks = [41_000, 41_000, 41_001, 41_000, 41_001, 41_002, 41_001, 41_003];
    const s = create(() => Promise.resolve(picks.shift() as number));
    expect(await s.start(leaderSpec('r-1'))).toMatchObject({ ok: true });
    expect(await s.start(leaderSpec('r-2'))).toMatchObject({ ok: true });
    const [one, two] = [await setUp(s, 'r-1'), await setUp(s, 'r-2')];
    expect([one.port, one.rendezvousPort, two.port, two.rendezvousPort]).toEqual([41_000, 41_001, 41_002, 41_003]);
  });

  it('announces no rendezvous port while its setup (the Ray head) has not run', async () => {
    // Real plan, but no `ray` on PATH: the head cannot start, so nobody must be sent to it.
    const s = create(undefined, false);
    expect(await s.start(leaderSpec('r-1'))).toMatchObject({ ok: true });
    const failed = await waitFor(() => s.snapshots().find((x) => x.state === 'failed'), { deadlineMs: 10_000, message: 'setup fails' });
    expect(failed.reason).toMatch(/ray/);
    expect(failed).not.toHaveProperty('rendezvousPort');
    expect(s.get('r-1')?.spec.leaderAddress).toMatch(/^10\.0\.0\.1:\d+$/);
  });

  it('keeps a rendezvous address the controller names, and reports none on other members or single-node replicas', async () => {
    const s = create();
    const known = await pickPortInRange('127.0.0.1', DEFAULT_ENGINE_PORTS, Math.random);
    expect(await s.start(leaderSpec('r-1', { leaderAddress: `10.0.0.1:${known}` }))).toMatchObject({ ok: true });
    expect(await s.start(leaderSpec('r-2', { rank: 1, leaderAddress: `10.0.0.1:${known}` }))).toMatchObject({ ok: true });
    expect(await s.start(leaderSpec('r-3', { members: [], tensorParallel: 2, pipelineParallel: 1 }))).toMatchObject({ ok: true });
    expect((await setUp(s, 'r-1')).rendezvousPort).toBe(known);
    const byId = new Map(s.snapshots().map((x) => [x.replicaId, x]));
    expect(byId.get('r-2')).not.toHaveProperty('rendezvousPort');
    expect(byId.get('r-3')).not.toHaveProperty('rendezvousPort');
  });
});
