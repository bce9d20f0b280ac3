import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NODE_SECRET_FILE, NodeSecretStore } from './node-secret.store';

describe('node secret', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'llmgw-nodesecret-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is absent before the first join; once issued it is kept 0600 and read back by the next process', () => {
    const first = new NodeSecretStore(dir);
    expect(first.secret()).toBeUndefined();
    const secret = 'Q2hhbmdlZCBieSB0aGUgY29udHJvbGxlcg_-0123456';
    first.save(secret);
    expect(first.secret()).toBe(secret);
    const file = join(dir, NODE_SECRET_FILE);
    expect(readFileSync(file, 'utf8')).toBe(`${secret}\n`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(new NodeSecretStore(dir).secret()).toBe(secret);
  });

  it('refuses a file that does not hold a secret, naming the file, and a malformed secret from the controller', () => {
    writeFileSync(join(dir, NODE_SECRET_FILE), 'not a secret\n');
    expect(() => new NodeSecretStore(dir)).toThrow(`${join(dir, NODE_SECRET_FILE)} does not hold a node secret`);
    rmSync(join(dir, NODE_SECRET_FILE));
    const store = new NodeSecretStore(dir);
    expect(() => store.save('../../short')).toThrow(/unexpected form/);
    expect(store.secret()).toBeUndefined();
  });
});
