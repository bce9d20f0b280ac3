import { readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { LaunchPlan } from '@llmgw/engines';
import { isValidReplicaId, type ReplicaSpec } from '../supervision/replica.model';
import { syncDir, writeFileAtomic } from './atomic-file';

/** The engine process behind a record: enough to recognise it again after an agent restart. */
export interface EngineProcessRecord {
  readonly pid: number;
  /** `/proc/<pid>/stat` field 22 when the agent started it; a reused pid never matches. */
  readonly startTime: string;
  /** When the agent started it, ms since the epoch. */
  readonly startedAt: number;
}

/**
 * What the agent keeps on disk about one supervised replica, so that engines outlive the agent:
 * a restarted agent re-adopts the live process (same pid and start time) instead of starting a
 * second one, and can restart a dead one with the same plan.
 */
export interface EngineRecord {
  readonly version: 1;
  readonly spec: ReplicaSpec;
  /** The plan the engine was started with (argv, env, port, readiness). */
  readonly plan: LaunchPlan;
  readonly weightsPath: string;
  /** True when the weights live in the cache (a missing file is fetched before a restart). */
  readonly cached: boolean;
  readonly logFile: string;
  /** Absent while no engine process runs (between a crash and its restart). */
  readonly process?: EngineProcessRecord;
  readonly restarts: number;
  /** Set once the agent stopped restarting it; the replica stays failed. */
  readonly failedReason?: string;
}

/** A record file that could not be used, and why (it is left in place for the operator). */
export interface RecordProblem {
  readonly file: string;
  readonly message: string;
}

/** Engine records, one JSON file per replica in `<stateDir>/engines/`, each written atomically. */
export class EngineRecordRepository {
  readonly dir: string;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'engines');
  }

  /** Every readable record; unreadable or malformed files are reported, not thrown. */
  list(): { records: EngineRecord[]; problems: RecordProblem[] } {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], problems: [] };
      throw error;
    }
    const records: EngineRecord[] = [];
    const problems: RecordProblem[] = [];
    for (const name of names.sort()) {
      if (!name.endsWith('.json') || name.startsWith('.')) continue;
      const file = join(this.dir, name);
      try {
        const record = parseRecord(JSON.parse(readFileSync(file, 'utf8')));
        if (`${record.spec.replicaId}.json` !== name) throw new Error(`holds replica ${record.spec.replicaId}, not ${name.slice(0, -5)}`);
        records.push(record);
      } catch (error) {
        problems.push({ file, message: error instanceof Error ? error.message : String(error) });
      }
    }
    return { records, problems };
  }

  save(record: EngineRecord): void {
    writeFileAtomic(this.fileOf(record.spec.replicaId), `${JSON.stringify(record, null, 2)}\n`);
  }

  /** Removes a replica's record; a missing one is fine. */
  remove(replicaId: string): void {
    try {
      unlinkSync(this.fileOf(replicaId));
      syncDir(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  private fileOf(replicaId: string): string {
    if (!isValidReplicaId(replicaId)) throw new Error(`replica id ${JSON.stringify(replicaId)} cannot name a record file`);
    return join(this.dir, `${replicaId}.json`);
  }
}

/** Checks the fields the agent relies on; the rest of the record is data it wrote itself. */
function parseRecord(value: unknown): EngineRecord {
  const r = value as Partial<EngineRecord> | null;
  if (r === null || typeof r !== 'object') throw new Error('not a JSON object');
  if (r.version !== 1) throw new Error(`unknown record version ${JSON.stringify(r.version)}`);
  if (!r.spec || typeof r.spec.replicaId !== 'string' || !isValidReplicaId(r.spec.replicaId)) throw new Error('spec.replicaId missing or invalid');
  if (!r.plan || typeof r.plan.command !== 'string' || !Array.isArray(r.plan.args)) throw new Error('plan missing or invalid');
  if (typeof r.logFile !== 'string' || typeof r.weightsPath !== 'string' || typeof r.cached !== 'boolean') throw new Error('logFile, weightsPath or cached missing');
  if (!Number.isSafeInteger(r.restarts) || (r.restarts as number) < 0) throw new Error('restarts missing or invalid');
  if (r.process !== undefined) {
    const p = r.process;
    if (!Number.isSafeInteger(p.pid) || p.pid <= 0 || typeof p.startTime !== 'string' || !/^\d+$/.test(p.startTime)) {
      throw new Error('process.pid or process.startTime invalid');
    }
  }
  // A record from an agent that predates teardown steps has none.
  if (!Array.isArray(r.plan.teardown)) return { ...(r as EngineRecord), plan: { ...r.plan, teardown: [] } };
  return r as EngineRecord;
}
