import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EngineRecordRepository, type EngineRecord } from './engine-record.repository';

const RECORD: EngineRecord = {
  version: 1,
  spec: {
    replicaId: 'r-1',
    model: 'tiny',
    engine: 'llamacpp',
    weightsSource: 'file:///models/tiny.gguf',
    cacheName: '',
    servedName: 'tiny',
    aliases: [],
    gpuIndices: [],
    rank: 0,
    members: [],
    tensorParallel: 1,
    pipelineParallel: 1,
    engineArgs: [],
    env: {},
  },
  plan: {
    role: 'server',
    command: 'llama-server',
    args: ['-m', '/models/tiny.gguf'],
    env: { CUDA_VISIBLE_DEVICES: '' },
    setup: [],
    teardown: [],
    port: 8000,
    healthPath: '/health',
    readiness: 'http-503-until-ready',
    metrics: {},
  },
  weightsPath: '/models/tiny.gguf',
  cached: false,
  logFile: '/state/logs/r-1.log',
  process: { pid: 1234, startTime: '987654', startedAt: 1_700_000_000_000 },
  restarts: 2,
};

describe('EngineRecordRepository', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'llmgw-records-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('saves, lists and removes records, one file per replica, with no temporary files left', () => {
    const repo = new EngineRecordRepository(dir);
    expect(repo.list()).toEqual({ records: [], problems: [] });
    repo.save(RECORD);
    repo.save({ ...RECORD, spec: { ...RECORD.spec, replicaId: 'r-2' }, process: undefined });
    expect(repo.list().records.map((r) => [r.spec.replicaId, r.process?.pid])).toEqual([
      ['r-1', 1234],
      ['r-2', undefined],
    ]);
    expect(readdirSync(repo.dir).sort()).toEqual(['r-1.json', 'r-2.json']);
    repo.remove('r-1');
    repo.remove('r-1');
    expect(repo.list().records.map((r) => r.spec.replicaId)).toEqual(['r-2']);
  });

  it('reports unreadable, malformed or misnamed files instead of trusting them', () => {
    const repo = new EngineRecordRepository(dir);
    mkdirSync(repo.dir, { recursive: true });
    writeFileSync(join(repo.dir, 'broken.json'), '{not json');
    writeFileSync(join(repo.dir, 'old.json'), JSON.stringify({ ...RECORD, version: 0 }));
    writeFileSync(join(repo.dir, 'r-9.json'), JSON.stringify(RECORD));
    writeFileSync(join(repo.dir, 'badpid.json'), JSON.stringify({ ...RECORD, spec: { ...RECORD.spec, replicaId: 'badpid' }, process: { pid: -1, startTime: 'x' } }));
    const { records, problems } = repo.list();
    expect(records).toEqual([]);
    expect(problems.map((p) => [p.file.split('/').pop(), p.message])).toEqual([
      ['badpid.json', 'process.pid or process.startTime invalid'],
      ['broken.json', expect.stringMatching(/JSON/)],
      ['old.json', 'unknown record version 0'],
      ['r-9.json', 'holds replica r-1, not r-9'],
    ]);
  });

  it('reads a record written before plans had teardown steps as one without any', () => {
    const repo = new EngineRecordRepository(dir);
    mkdirSync(repo.dir, { recursive: true });
    const { teardown: _t, ...oldPlan } = RECORD.plan;
    writeFileSync(join(repo.dir, 'r-1.json'), JSON.stringify({ ...RECORD, plan: oldPlan }));
    expect(repo.list().records.map((r) => r.plan.teardown)).toEqual([[]]);
  });

  it('refuses a replica id that could name a file elsewhere', () => {
    const repo = new EngineRecordRepository(dir);
    expect(() => repo.save({ ...RECORD, spec: { ...RECORD.spec, replicaId: '../escape' } })).toThrow(/cannot name a record file/);
  });
});
