import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadCatalog } from '@llmgw/catalog';
import { afterAll, describe, expect, it } from 'vitest';
import { renderCatalog, writeLocalCatalog } from './local-catalog.writer';

const TEMPLATE = resolve(__dirname, '..', '..', '..', 'deploy', 'local', 'catalog.yaml');

describe('the default local catalog', () => {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-cat-'x'-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is one tiny llama.cpp model on the CPU, pointing at the generated file in the data directory', () => {
    const out = join(dir, 'catalog.yaml');
    const { catalog } = writeLocalCatalog(TEMPLATE, out, { LLMGW_DATA_DIR: dir });
    expect(catalog.models).toHaveLength(1);
    const [model] = catalog.models;
    expect(model.name).toBe('llmgw-tiny');
    expect(model.source).toBe(`file://${dir}/models/llmgw-tiny.gguf`);
    expect(model.replicas).toEqual({ min: 1, max: 1 });
    expect(model.profiles).toHaveLength(1);
    expect(model.profiles[0].engine).toBe('llamacpp');
    expect(model.profiles[0].gpuClass).toBeUndefined();
    // The written file is itself a valid catalog (what the controller reads), a path with quotes intact.
    expect(loadCatalog(readFileSync(out, 'utf8')).models[0].source).toBe(model.source);
  });
});

describe('renderCatalog', () => {
  it('refuses a data directory with a space, which a file:// source cannot hold, naming the variable', () => {
    expect(() => renderCatalog('models: []', { LLMGW_DATA_DIR: '/home/a b/.llmgw' }, 't.yaml')).toThrow(
      'the data directory "/home/a b/.llmgw" contains whitespace, which a file:// source cannot hold: set LLMGW_DATA_DIR to a path without spaces',
    );
  });
  it('names an unknown placeholder', () => {
    expect(() => renderCatalog('models: [{name: a, source: "file://${NOPE}/x", size: 1, replicas: 1, profiles: [{engine: llamacpp}]}]', { LLMGW_DATA_DIR: '/d' }, 't.yaml')).toThrow(
      't.yaml: unknown placeholder ${NOPE}',
    );
  });
  it('names every problem of an invalid catalog', () => {
    expect(() => renderCatalog('models: [{name: a, source: "file://${LLMGW_DATA_DIR}/x", replicas: 1, profiles: [{engine: vllm}]}]', { LLMGW_DATA_DIR: '/d' }, 't.yaml')).toThrow(
      /^t\.yaml: invalid catalog: 2 problems\nmodels\[0\]\.size: required/,
    );
  });
  it('refuses an empty catalog: there would be nothing to serve', () => {
    expect(() => renderCatalog('models: []', { LLMGW_DATA_DIR: '/d' }, 't.yaml')).toThrow('t.yaml: the catalog has no models');
  });
});
