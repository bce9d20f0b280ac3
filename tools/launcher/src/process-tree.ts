// Finds every process a launched program started, from /proc, so none outlives the launcher —
// including engines an agent starts in process groups of their own, and ones orphaned when the
// agent dies first.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One process as /proc/<pid>/stat describes it. `startTime` (clock ticks since boot) tells a reused pid apart. */
export interface ProcInfo {
  readonly pid: number;
  readonly ppid: number;
  readonly pgrp: number;
  /** Single-letter state: R, S, D, Z (zombie), T, ... */
  readonly state: string;
  readonly startTime: string;
  /** Executable name, as the kernel shortens it (at most 15 characters). */
  readonly comm: string;
}

/**
 * Parses the text of `/proc/<pid>/stat`; undefined when it is not in that shape. The command name
 * sits in parentheses and may itself contain spaces and parentheses, so fields are counted from
 * the last `)`.
 */
export function parseProcStat(text: string): ProcInfo | undefined {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return undefined;
  const pid = Number(text.slice(0, open).trim());
  const rest = text.slice(close + 2).trim().split(/\s+/);
  // rest[0] is field 3 (state); field N is rest[N - 3].
  const ppid = Number(rest[1]);
  const pgrp = Number(rest[2]);
  const startTime = rest[19];
  if (!Number.isInteger(pid) || !Number.isInteger(ppid) || !Number.isInteger(pgrp) || startTime === undefined || !/^\d+$/.test(startTime)) return undefined;
  return { pid, ppid, pgrp, state: rest[0] ?? '?', startTime, comm: text.slice(open + 1, close) };
}

/** Every process visible in `procDir` (default /proc), by pid. Processes that vanish while it reads are skipped. */
export function readProcessTable(procDir = '/proc'): Map<number, ProcInfo> {
  const table = new Map<number, ProcInfo>();
  let entries: string[];
  try {
    entries = readdirSync(procDir);
  } catch {
    return table;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const info = parseProcStat(readFileSync(join(procDir, entry, 'stat'), 'utf8'));
      if (info !== undefined) table.set(info.pid, info);
    } catch {
      // Exited between readdir and read.
    }
  }
  return table;
}

/** All descendants of `roots` in `table` (children, grandchildren, ...), roots excluded. */
export function descendantsOf(table: ReadonlyMap<number, ProcInfo>, roots: Iterable<number>): ProcInfo[] {
  const children = new Map<number, ProcInfo[]>();
  for (const info of table.values()) {
    const list = children.get(info.ppid);
    if (list) list.push(info);
    else children.set(info.ppid, [info]);
  }
  const out: ProcInfo[] = [];
  const seen = new Set<number>();
  const queue = [...roots];
  for (const r of queue) seen.add(r);
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    for (const child of children.get(pid) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

/**
 * A short name for a process from its command line: the program a runtime runs (`node
 * /x/bin/llama-server-node -m ...` → `llama-server-node`; this repository's `node tools/run.cjs
 * tools/sim-engine/src/main.ts` → `sim-engine`), else the executable. Undefined when gone.
 */
export function describeProcess(pid: number, procDir = '/proc'): string | undefined {
  let argv: string[];
  try {
    argv = readFileSync(join(procDir, String(pid), 'cmdline'), 'utf8').split('\0').filter(Boolean);
  } catch {
    return undefined;
  }
  if (argv.length === 0) return undefined;
  const base = (p: string): string => p.slice(p.lastIndexOf('/') + 1);
  const runtime = /^(node|nodejs|python3?|bun|deno)$/.test(base(argv[0]));
  const scripts = runtime ? argv.slice(1).filter((a) => !a.startsWith('-')) : [];
  if (scripts.length > 1 && base(scripts[0]) === 'run.cjs') {
    const entry = /\/(?:apps|tools)\/([^/]+)\/src\/main\.ts$/.exec(scripts[1]);
    return entry ? entry[1] : base(scripts[1]);
  }
  return base(scripts[0] ?? argv[0]);
}

/** True while `info`'s process runs: same pid, same start time, not a zombie. */
export function isAlive(info: Pick<ProcInfo, 'pid' | 'startTime'>, procDir = '/proc'): boolean {
  try {
    const now = parseProcStat(readFileSync(join(procDir, String(info.pid), 'stat'), 'utf8'));
    return now !== undefined && now.startTime === info.startTime && now.state !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Remembers every process ever seen below a set of root pids. Call {@link refresh} regularly:
 * a grandchild whose parent died is re-parented away from the tree, and only an earlier sighting
 * still connects it to the launcher. {@link alive} and {@link signalAll} skip anything that
 * exited or whose pid now belongs to another process.
 */
export class ProcessTreeTracker {
  readonly #roots = new Set<number>();
  readonly #known = new Map<number, ProcInfo>();

  constructor(private readonly procDir = '/proc') {}

  /** Adds a root (a process this program started itself). */
  addRoot(pid: number): void {
    this.#roots.add(pid);
  }

  /** Reads /proc again and records every process now below a root or below one already known. */
  refresh(): void {
    const table = readProcessTable(this.procDir);
    const seeds = [...this.#roots, ...[...this.#known.values()].filter((k) => table.get(k.pid)?.startTime === k.startTime).map((k) => k.pid)];
    for (const info of descendantsOf(table, seeds)) this.#known.set(info.pid, info);
    // Known processes as they are now, while they are the same process (same start time): an exec
    // renames one, setsid moves it to its own group. descendantsOf leaves its seeds out, so a
    // process first seen between fork and exec would otherwise keep its parent's name for good.
    for (const [pid, known] of this.#known) {
      const now = table.get(pid);
      if (now !== undefined && now.startTime === known.startTime) this.#known.set(pid, now);
    }
    for (const pid of this.#roots) {
      const info = table.get(pid);
      if (info) this.#known.set(pid, info);
    }
  }

  /** Known processes still running (roots included). */
  alive(): ProcInfo[] {
    return [...this.#known.values()].filter((info) => isAlive(info, this.procDir));
  }

  /** Sends `signal` to every known process still running, except `except`; returns those signalled. */
  signalAll(signal: NodeJS.Signals, except: ReadonlySet<number> = new Set()): ProcInfo[] {
    const hit: ProcInfo[] = [];
    for (const info of this.alive()) {
      if (except.has(info.pid)) continue;
      try {
        process.kill(info.pid, signal);
        hit.push(info);
      } catch {
        // Gone meanwhile.
      }
    }
    return hit;
  }
}
