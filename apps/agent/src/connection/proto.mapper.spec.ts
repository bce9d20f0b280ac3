import { CollectOutcome, ConnectRequest, EngineKind, ReplicaState, type StartReplica } from '@llmgw/proto';
import { describe, expect, it } from 'vitest';
import { commandResultMessage, gpuStateToWire, gpuToWire, replicaSpecFromWire, replicaStatusMessage, supervisedToWire } from './proto.mapper';

describe('proto mapping at the agent edge', () => {
  it('unknown GPU figures stay unset on the wire; measured zeros stay zeros', () => {
    const unknown = gpuToWire({ index: 0, uuid: 'GPU-a', name: 'L4', gpuClass: 'L4', memoryTotalBytes: 1, healthy: true });
    const zero = gpuToWire({ index: 1, uuid: 'GPU-b', name: 'L4', gpuClass: 'L4', memoryTotalBytes: 1, memoryUsedBytes: 0, utilizationPct: 0, temperatureC: 0, eccErrors: 0, healthy: true });
    expect('utilizationPct' in unknown).toBe(false);
    expect(zero).toMatchObject({ memoryUsedBytes: 0, utilizationPct: 0, temperatureC: 0, eccErrors: 0 });
    // Through the real codec: unset decodes as undefined, 0 as 0.
    const decoded = ConnectRequest.decode(
      ConnectRequest.encode({ payload: { $case: 'heartbeat', value: { gpus: [gpuStateToWire({ index: 0, uuid: '', name: '', gpuClass: '', memoryTotalBytes: 1, healthy: true }), gpuStateToWire({ index: 1, uuid: '', name: '', gpuClass: '', memoryTotalBytes: 1, utilizationPct: 0, healthy: true })], replicas: [] } } }).finish(),
    );
    const gpus = decoded.payload?.$case === 'heartbeat' ? decoded.payload.value.gpus : [];
    expect(gpus.map((g) => g.utilizationPct)).toEqual([undefined, 0]);
  });

  it('replica snapshots and status events carry only what is known', () => {
    expect(supervisedToWire({ replicaId: 'r', model: 'm', engine: 'llamacpp', state: 'fetching', gpuIndices: [], rank: 0, restarts: 0 })).toEqual({
      replicaId: 'r',
      model: 'm',
      engine: EngineKind.ENGINE_KIND_LLAMACPP,
      state: ReplicaState.REPLICA_STATE_FETCHING,
      gpuIndices: [],
      rank: 0,
      restarts: 0,
    });
    const status = replicaStatusMessage({ replicaId: 'r', state: 'failed', restarts: 2, exitCode: 0, lastLogLines: ['boom'], reason: 'x' });
    expect(status.payload).toEqual({
      $case: 'replicaStatus',
      value: { replicaId: 'r', state: ReplicaState.REPLICA_STATE_FAILED, restarts: 2, exitCode: 0, lastLogLines: ['boom'], reason: 'x' },
    });
  });

  it('collect results map each outcome', () => {
    const m = commandResultMessage('c1', true, 'done', [
      { path: 'a', outcome: 'removed', reason: '' },
      { path: 'b', outcome: 'refused', reason: 'no' },
      { path: 'c', outcome: 'not-found', reason: 'nothing there' },
      { path: 'd', outcome: 'failed', reason: 'EACCES' },
    ]);
    expect(m.payload?.$case === 'commandResult' && m.payload.value.paths.map((p) => p.outcome)).toEqual([
      CollectOutcome.COLLECT_OUTCOME_REMOVED,
      CollectOutcome.COLLECT_OUTCOME_REFUSED,
      CollectOutcome.COLLECT_OUTCOME_NOT_FOUND,
      CollectOutcome.COLLECT_OUTCOME_FAILED,
    ]);
  });

  it('StartReplica becomes a ReplicaSpec; an unknown engine is refused; 0 and empty mean unset', () => {
    const wire: StartReplica = {
      commandId: 'c',
      replicaId: 'r',
      model: 'm',
      engine: EngineKind.ENGINE_KIND_VLLM,
      weightsSource: 'hf://a/b@main',
      cacheName: 'llmgw-0000000000000000-b',
      localPath: '',
      servedName: 'm',
      aliases: ['m2'],
      gpuIndices: [0, 1],
      port: 0,
      rank: 0,
      members: [],
      tensorParallel: 2,
      pipelineParallel: 1,
      engineArgs: ['--enforce-eager'],
      env: { A: 'b' },
    };
    const spec = replicaSpecFromWire(wire);
    expect(spec).toMatchObject({ engine: 'vllm', gpuIndices: [0, 1], aliases: ['m2'], env: { A: 'b' } });
    expect('port' in spec).toBe(false);
    expect('localPath' in spec).toBe(false);
    expect(() => replicaSpecFromWire({ ...wire, engine: EngineKind.ENGINE_KIND_UNSPECIFIED })).toThrow(/engine 0 is not one this agent runs/);
  });
});
