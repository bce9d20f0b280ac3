import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PemPair } from './certificate.factory';

/** Where {@link writePemPair} put a pair. */
export interface PemPairFiles {
  certFile: string;
  keyFile: string;
}

/** The files of pair `name` in `dir`: `<name>.crt` and `<name>.key`. */
export function pemPairFiles(dir: string, name: string): PemPairFiles {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`${JSON.stringify(name)} is not a usable file name (letters, digits, ".", "_", "-")`);
  return { certFile: join(dir, `${name}.crt`), keyFile: join(dir, `${name}.key`) };
}

/**
 * Writes `<name>.crt` (0644) and `<name>.key` (0600) in `dir`, creating `dir` (and its parents)
 * 0700 when it does not exist (an existing directory keeps its mode). Refuses, before writing
 * anything, when either file exists, unless `overwrite`; then each file is replaced atomically
 * (written beside it, then renamed), so a reader never sees half a file. The key is written first.
 */
export function writePemPair(dir: string, name: string, pair: PemPair, options: { overwrite?: boolean } = {}): PemPairFiles {
  const files = pemPairFiles(dir, name);
  if (!options.overwrite) {
    for (const file of [files.keyFile, files.certFile]) {
      if (existsSync(file)) throw new Error(`${file} exists; refusing to overwrite it`);
    }
  }
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }
  writeAtomically(files.keyFile, pair.keyPem, 0o600);
  writeAtomically(files.certFile, pair.certPem, 0o644);
  return files;
}

/** Reads the pair `name` from `dir` ({@link pemPairFiles}); throws naming the file that is missing. */
export function readPemPair(dir: string, name: string): PemPair {
  const files = pemPairFiles(dir, name);
  const read = (file: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      throw new Error(`cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
  };
  return { certPem: read(files.certFile), keyPem: read(files.keyFile) };
}

function writeAtomically(file: string, text: string, mode: number): void {
  const temporary = `${file}.${process.pid}.tmp`;
  rmSync(temporary, { force: true }); // a stale one from a crash: never write a key into a file of another mode
  writeFileSync(temporary, text, { mode, flag: 'wx' });
  chmodSync(temporary, mode); // the umask may have narrowed it
  renameSync(temporary, file);
}
