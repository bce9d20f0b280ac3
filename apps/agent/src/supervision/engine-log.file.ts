import { appendFileSync, closeSync, copyFileSync, fstatSync, mkdirSync, openSync, readSync, renameSync, statSync, truncateSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';

/** Size bound of an engine's log: the live file plus `files - 1` rotated copies, each at most `maxBytes` (roughly). */
export interface LogRotation {
  readonly maxBytes: number;
  /** Files kept in all, including the live one; at least 1. */
  readonly files: number;
}

/**
 * An engine's output file `<stateDir>/logs/<replicaId>.log`, with `.1`, `.2`, ... as rotated
 * copies (newest first).
 *
 * The engine writes to the file itself (its stdout and stderr are the file, opened for append),
 * never through a pipe to the agent: a pipe would break when the agent restarts and take the
 * engine down with it. Rotation is therefore copy-then-truncate, checked by `rotateIfNeeded()`
 * on a timer: appends after the truncation land at the new end. Lines written between the copy
 * and the truncation can be lost, and the bound is exceeded by what is written between checks.
 */
export class EngineLogFile {
  constructor(
    readonly path: string,
    private readonly rotation: LogRotation,
  ) {
    if (!Number.isSafeInteger(rotation.files) || rotation.files < 1) throw new RangeError(`log files must be >= 1 (got ${rotation.files})`);
    if (!Number.isSafeInteger(rotation.maxBytes) || rotation.maxBytes < 1) throw new RangeError(`log maxBytes must be >= 1 (got ${rotation.maxBytes})`);
  }

  /** A file descriptor opened for append, to hand to a child as stdout/stderr; the caller closes it. */
  openForAppend(): number {
    mkdirSync(dirname(this.path), { recursive: true });
    return openSync(this.path, 'a', 0o640);
  }

  /** Appends one line written by the agent itself (starts, exits), marked as such. */
  note(line: string): void {
    mkdirSync(dirname(this.path), { recursive: true });
    appendFileSync(this.path, `--- llmgw-agent: ${line}\n`, { mode: 0o640 });
  }

  /** Rotates when the live file is over the bound; true when it did. */
  rotateIfNeeded(): boolean {
    let size: number;
    try {
      size = statSync(this.path).size;
    } catch {
      return false;
    }
    if (size <= this.rotation.maxBytes) return false;
    if (this.rotation.files === 1) {
      truncateSync(this.path, 0);
      return true;
    }
    // Drop the oldest copy, shift .1 → .2 → ..., then copy the live file to .1 and truncate it.
    unlinkIfExists(`${this.path}.${this.rotation.files - 1}`);
    for (let i = this.rotation.files - 2; i >= 1; i--) {
      try {
        renameSync(`${this.path}.${i}`, `${this.path}.${i + 1}`);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
    copyFileSync(this.path, `${this.path}.1`);
    truncateSync(this.path, 0);
    return true;
  }

  /** The last `count` lines of output, oldest first (from the previous file when the live one is short). */
  tail(count = 20): string[] {
    const lines = readTailLines(this.path, count);
    if (lines.length < count && this.rotation.files > 1) {
      return [...readTailLines(`${this.path}.1`, count - lines.length), ...lines];
    }
    return lines;
  }

  /** Removes the live file and every rotated copy. */
  removeAll(): void {
    unlinkIfExists(this.path);
    for (let i = 1; i < this.rotation.files; i++) unlinkIfExists(`${this.path}.${i}`);
  }
}

const TAIL_BYTES = 64 * 1024;
const MAX_LINE_CHARS = 2_000;

function readTailLines(path: string, count: number): string[] {
  if (count <= 0) return [];
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return [];
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    const lines = buffer.toString('utf8').split('\n');
    if (length < size) lines.shift(); // the first line is cut
    while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
    return lines.slice(-count).map((line) => (line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line));
  } finally {
    closeSync(fd);
  }
}

function unlinkIfExists(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
