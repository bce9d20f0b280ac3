import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Writes `data` to `path` so that a reader (or the next process after a crash) sees either the
 * old content or the new, never half of it: a temporary file in the same directory, fsync,
 * rename over `path`, fsync of the directory. Creates the directory when missing.
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, mode = 0o644): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(tmp, 'wx', mode);
  try {
    writeSync(fd, typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    unlinkSync(tmp);
    throw error;
  }
  closeSync(fd);
  renameSync(tmp, path);
  syncDir(dir);
}

/** fsync a directory so a rename or unlink in it survives a power cut; best effort. */
export function syncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Some filesystems refuse fsync on directories; the rename itself is still atomic.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
