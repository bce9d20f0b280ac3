import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isValidNodeId, loadOrCreateNodeId, newNodeId, NODE_ID_FILE } from './node-id.store';

describe('node id', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'llmgw-nodeid-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is generated once, written to the state directory, and read back unchanged', () => {
    const first = loadOrCreateNodeId(dir, () => 'gpu-box-1-deadbeef');
    expect(first).toEqual({ nodeId: 'gpu-box-1-deadbeef', created: true });
    expect(readFileSync(join(dir, NODE_ID_FILE), 'utf8')).toBe('gpu-box-1-deadbeef\n');
    const second = loadOrCreateNodeId(dir, () => 'would-be-new');
    expect(second).toEqual({ nodeId: 'gpu-box-1-deadbeef', created: false });
  });

  it('refuses a file that does not hold a valid id, naming the file, rather than inventing a new identity', () => {
    writeFileSync(join(dir, NODE_ID_FILE), '../../etc\n');
    expect(() => loadOrCreateNodeId(dir)).toThrow(`${join(dir, NODE_ID_FILE)} does not hold a valid node id`);
  });

  it('new ids are the safe host name plus random hex', () => {
    expect(newNodeId('GPU box_7.example.com', () => 'a1b2c3d4')).toBe('GPU-box-7-example-com-a1b2c3d4');
    expect(newNodeId('---', () => '00000000')).toBe('node-00000000');
    expect(isValidNodeId(newNodeId('x'.repeat(100)))).toBe(true);
    expect(isValidNodeId('')).toBe(false);
    expect(isValidNodeId('a/b')).toBe(false);
  });
});
