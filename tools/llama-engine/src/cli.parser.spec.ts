import { describe, expect, it } from 'vitest';
import { defaultThreads, parseCli, slotContextSize } from './cli.parser';

describe('parseCli', () => {
  it('takes the llama-server flags the agent passes, short and long', () => {
    const r = parseCli(['-m', '/m.gguf', '--host', '0.0.0.0', '--port', '0', '--metrics', '--alias', 'tiny', '-c', '2048', '-np', '2', '-ngl', '0', '-t', '3'], 2);
    expect(r).toEqual({
      kind: 'config',
      config: { modelPath: '/m.gguf', host: '0.0.0.0', port: 0, metrics: true, alias: 'tiny', ctxSize: 2048, parallel: 2, gpuLayers: 0, threads: 3, debugLoadDelayMs: 0 },
    });
    const long = parseCli(['--model=/m.gguf', '--ctx-size', '512', '--parallel=4', '--n-gpu-layers', '999', '--threads', '1'], 2);
    expect(long).toMatchObject({ kind: 'config', config: { modelPath: '/m.gguf', ctxSize: 512, parallel: 4, gpuLayers: 999, threads: 1 } });
  });

  it('defaults like llama-server: 127.0.0.1:8080, one slot, no metrics, the model path as alias', () => {
    expect(parseCli(['-m', 'x.gguf'], 16)).toEqual({
      kind: 'config',
      config: { modelPath: 'x.gguf', host: '127.0.0.1', port: 8080, metrics: false, alias: 'x.gguf', ctxSize: undefined, parallel: 1, gpuLayers: undefined, threads: 8, debugLoadDelayMs: 0 },
    });
  });

  it.each([
    [['-m', 'a', '--flash-attn'], 'unknown flag --flash-attn'],
    [['-m', 'a', 'stray'], 'unexpected argument "stray"'],
    [['-m', 'a', '--port', '70000'], '--port must be <= 65535 (got 70000)'],
    [['-m', 'a', '--port', '8k'], '--port must be an integer (got "8k")'],
    [['-m', 'a', '-np', '0'], '-np must be >= 1 (got 0)'],
    [['-m', 'a', '-c'], '-c needs a value'],
    [['-m', 'a', '--metrics=yes'], '--metrics takes no value (got "yes")'],
    [['-m', 'a', '--model', 'b'], '--model given more than once'],
    [['--port', '1'], '-m/--model is required'],
  ])('refuses %j: %s', (argv, problem) => {
    const r = parseCli(argv, 2);
    expect(r.kind).toBe('error');
    expect(r.kind === 'error' && r.problems).toContain(problem);
  });

  it('lists every problem at once', () => {
    const r = parseCli(['--bogus', '-np', 'x', '-t', '0'], 2);
    expect(r).toEqual({ kind: 'error', problems: ['unknown flag --bogus', '-np must be an integer (got "x")', '-t must be >= 1 (got 0)', '-m/--model is required'] });
  });

  it('answers help', () => {
    expect(parseCli(['-m', 'a', '--help'], 2)).toEqual({ kind: 'help' });
  });
});

describe('defaultThreads', () => {
  it.each([
    [1, 1],
    [2, 1],
    [4, 1],
    [6, 3],
    [16, 8],
  ])('%i cores -> %i thread(s)', (cores, threads) => expect(defaultThreads(cores)).toBe(threads));
});

describe('slotContextSize', () => {
  it.each([
    [{ ctxSize: undefined, parallel: 1 }, 2048, 2048],
    [{ ctxSize: undefined, parallel: 2 }, 32768, 2048],
    [{ ctxSize: 0, parallel: 4 }, 32768, 8192],
    [{ ctxSize: 1000, parallel: 3 }, 2048, 333],
    [{ ctxSize: 1, parallel: 4 }, 2048, 1],
  ])('%j with a %i-token training context -> %i per slot', (config, train, perSlot) => expect(slotContextSize(config, train)).toBe(perSlot));
});
