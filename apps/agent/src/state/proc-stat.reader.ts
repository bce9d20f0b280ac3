import { readFileSync } from 'node:fs';

/** What the agent reads from `/proc/<pid>/stat` to recognise a process it started. */
export interface ProcStat {
  readonly pid: number;
  /** One letter: R, S, D, Z (zombie: exited, not yet reaped), T, ... */
  readonly state: string;
  /** Process group id (field 5); an engine the agent started leads its own group. */
  readonly pgrp: number;
  /**
   * Field 22: when the process started, in clock ticks after boot, kept as text (exact, and only
   * ever compared). A pid reused by another process has another start time.
   */
  readonly startTime: string;
}

/**
 * Parses one `/proc/<pid>/stat` line; undefined when it is not one. The command name (field 2)
 * may hold spaces and parentheses, so fields are counted after its last `)`.
 */
export function parseProcStat(text: string): ProcStat | undefined {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 1 || close < open) return undefined;
  const pid = Number(text.slice(0, open).trim());
  // Field 3 (state) is the first after ") "; field N is at index N - 3.
  const rest = text.slice(close + 1).trim().split(/\s+/);
  const state = rest[0];
  const pgrp = Number(rest[5 - 3]);
  const startTime = rest[22 - 3];
  if (!Number.isSafeInteger(pid) || pid <= 0 || !state || !Number.isSafeInteger(pgrp) || !/^\d+$/.test(startTime ?? '')) return undefined;
  return { pid, state, pgrp, startTime };
}

/** Reads a process's stat; undefined when no such process exists (or /proc is unreadable). */
export function readProcStat(pid: number, procDir = '/proc'): ProcStat | undefined {
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined;
  try {
    return parseProcStat(readFileSync(`${procDir}/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * True when `pid` still runs the very process that had `startTime`: it exists, is not a zombie
 * and started at the same tick. A pid the kernel handed to someone else never matches.
 */
export function isSameLiveProcess(pid: number, startTime: string, procDir = '/proc'): boolean {
  const stat = readProcStat(pid, procDir);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X' && stat.startTime === startTime;
}
