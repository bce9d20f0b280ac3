import { describe, expect, it } from 'vitest';
import { parseArgs, type SimConfig } from './cli.parser';

function config(argv: string[]): SimConfig {
  const r = parseArgs(argv);
  if (r.kind !== 'config') throw new Error(`expected a config, got ${JSON.stringify(r)}`);
  return r.config;
}

function problems(argv: string[]): string[] {
  const r = parseArgs(argv);
  if (r.kind !== 'error') throw new Error(`expected errors, got ${JSON.stringify(r)}`);
  return r.problems;
}

describe('parseArgs', () => {
  it('takes the simulator flags', () => {
    const c = config([
      '--engine', 'vllm', '--port', '0', '--served-model-name', 'm', '--max-running', '4', '--prefill-tps', '2e4', '--decode-tps=30',
      '--kv-capacity-tokens', '4096', '--prefix-cache', '--seed', '7', '--output-tokens', '12', '--load-seconds', '1.5', '--slow-start', '0.5',
      '--error-rate', '0.25', '--crash-after', '3', '--hang', '--fail-mid-stream-after', '5', '--fail-before-content', '--api-key', 'k',
    ]);
    expect(c).toMatchObject({
      engine: 'vllm', port: 0, servedModelNames: ['m'], maxRunning: 4, prefillTps: 20000, decodeTps: 30, kvCapacityTokens: 4096, maxModelLen: 4096,
      prefixCaching: true, seed: 7, outputTokens: 12, loadSeconds: 2, errorRate: 0.25, crashAfter: 3, hang: true, failMidStreamAfter: 5, failBeforeContent: true, apiKey: 'k', metrics: true,
    });
  });

  it('a profile sets speed and KV size from a named GPU class; explicit flags win; an unknown one is refused', () => {
    expect(config(['--served-model-name', 'm', '--profile', 'l4-llama-3.1-8b'])).toMatchObject({ prefillTps: 3500, decodeTps: 15, kvCapacityTokens: 30720, maxModelLen: 30720 });
    expect(config(['--served-model-name', 'm', '--profile=l4-llama-3.1-8b', '--decode-tps', '20'])).toMatchObject({ prefillTps: 3500, decodeTps: 20 });
    expect(problems(['--served-model-name', 'm', '--profile', 'h100'])).toEqual(["--profile: expected one of l4-llama-3.1-8b, got 'h100'"]);
    expect(problems(['--served-model-name', 'm', '--profile', 'toString'])[0]).toMatch(/^--profile: expected one of/);
  });

  it('accepts a vLLM command line: serve, positional model, several served names, parallelism flags ignored', () => {
    const c = config(['serve', '/models/llama', '--host', '0.0.0.0', '--port', '8001', '--served-model-name', 'a', 'b', '--tensor-parallel-size', '2',
      '--pipeline-parallel-size', '1', '--max-num-seqs', '16', '--max-model-len', '8192', '--gpu-memory-utilization', '0.9', '--enable-prefix-caching',
      '--trust-remote-code', '--dtype', 'auto']);
    expect(c).toMatchObject({ engine: 'vllm', host: '0.0.0.0', port: 8001, servedModelNames: ['a', 'b'], modelPath: '/models/llama', maxRunning: 16, maxModelLen: 8192, prefixCaching: true });
  });

  it('accepts a llama-server command line and picks the llama.cpp flavour from its flags', () => {
    const c = config(['-m', '/cache/tiny.gguf', '--alias', 'tiny', '--host', '127.0.0.1', '--port', '0', '-c', '8192', '-np', '4', '--metrics', '-ngl', '99', '-fa', 'on', '--kv-metric']);
    expect(c).toMatchObject({ engine: 'llamacpp', servedModelNames: ['tiny'], modelPath: '/cache/tiny.gguf', kvCapacityTokens: 8192, maxRunning: 4, maxModelLen: 2048, metrics: true, kvMetric: true });
  });

  it('uses the model path as the served name when none is given, and engine defaults per flavour', () => {
    expect(config(['/m/x'])).toMatchObject({ engine: 'vllm', servedModelNames: ['/m/x'], port: 8000, maxRunning: 256, metrics: true });
    expect(config(['--engine', 'llamacpp', '-m', 'x.gguf'])).toMatchObject({ servedModelNames: ['x.gguf'], port: 8080, maxRunning: 4, metrics: false });
    expect(config(['--engine', 'vllm', '--served-model-name', 'm', '--num-gpu-blocks-override', '100', '--block-size', '32'])).toMatchObject({ kvCapacityTokens: 3200 });
  });

  it.each([
    ['llama.cpp by default: on, like llama-server', ['--engine', 'llamacpp', '-m', 'x.gguf'], { engine: 'llamacpp', slots: true }],
    ['--no-slots turns it off (and picks llama.cpp)', ['-m', 'x.gguf', '--no-slots'], { engine: 'llamacpp', slots: false }],
    ['--slots keeps it on', ['-m', 'x.gguf', '--no-slots', '--slots'], { engine: 'llamacpp', slots: true }],
    ['vLLM has no /slots', ['--served-model-name', 'm'], { engine: 'vllm', slots: false }],
  ])('/slots: %s', (_name, argv, expected) => {
    expect(config(argv)).toMatchObject(expected);
  });

  it('answers --help', () => {
    expect(parseArgs(['--served-model-name', 'm', '--help'])).toEqual({ kind: 'help' });
  });

  it.each([
    [['--served-model-name', 'm', '--frobnicate'], 'unknown flag --frobnicate'],
    [['--served-model-name', 'm', '--port', 'abc'], "--port: expected an integer, got 'abc'"],
    [['--served-model-name', 'm', '--port', '70000'], '--port: expected 0..65535, got 70000'],
    [['--served-model-name', 'm', '--engine', 'tgi'], "--engine: expected vllm or llamacpp, got 'tgi'"],
    [['--served-model-name', 'm', '--port'], '--port: expected a value'],
    [['--served-model-name', 'm', '--max-running', '0'], '--max-running: expected a positive integer, got 0'],
    [['--served-model-name', 'm', '--decode-tps', '0'], '--decode-tps: expected a finite number > 0, got 0'],
    [['--served-model-name', 'm', '--error-rate', '1.5'], '--error-rate: expected 0 <= F <= 1, got 1.5'],
    [['--served-model-name', 'm', '--max-model-len', '5000', '--kv-capacity-tokens', '4096'], '--max-model-len (5000) is larger than the KV cache holds (4096 tokens)'],
    [['--engine', 'vllm', '--served-model-name', 'm', '--kv-metric'], '--kv-metric: only the llama.cpp flavour has it'],
    [['--engine', 'vllm', '--served-model-name', 'm', '--no-slots'], '--slots/--no-slots: only the llama.cpp flavour has /slots'],
    [['--served-model-name', 'm', '--hang=yes'], "--hang: takes no value, got 'yes'"],
    [['a', 'b'], 'unexpected arguments: b'],
    [['--port', '1'], 'no model name'],
  ])('rejects %j naming the problem', (argv, message) => {
    expect(problems(argv).join('\n')).toContain(message);
  });

  it('reports every problem at once', () => {
    expect(problems(['--port', 'x', '--seed', 'y', '--bogus'])).toHaveLength(4);
  });
});
