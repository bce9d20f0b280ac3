// llmgw-router's graceful drain on SIGTERM, as a real process in front of a sim-engine whose
// streams take seconds: /readyz turns 503 at once while requests are still served, the listener
// then closes, streams in flight finish, and the process exits 0; a stream longer than the drain
// timeout is cut with an SSE error event, and the process still exits 0.
import { inheritedTestEnv, runTsEntry, spawnProcess, stopAllSpawned, waitFor, type SpawnedProcess } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimEngine, tempDir, writeRouterConfig, type SimEngine } from './test/router.harness';

let engine: SimEngine;
let config: string;
let dir: string;

beforeAll(async () => {
  // 10 tokens a second: 20 tokens take 2 s, 200 take 20 s.
  engine = await startSimEngine(['--engine', 'vllm', '--served-model-name', 'slow', '--decode-tps', '10', '--output-jitter', '0', '--output-tokens', '20']);
  dir = tempDir();
  config = writeRouterConfig(dir, { models: [{ name: 'slow', engine: 'vllm' }], endpoints: [{ id: 'replica-0', model: 'slow', url: engine.url }] });
}, 120_000);

afterAll(async () => {
  await stopAllSpawned();
});

async function startRouter(env: Record<string, string>): Promise<{ proc: SpawnedProcess; base: string }> {
  const clean = inheritedTestEnv();
  const proc = await spawnProcess({
    ...runTsEntry('apps/router/src/main.ts'),
    name: 'llmgw-router',
    cleanEnv: true,
    env: { ...clean, LLMGW_ROUTER_PORT: '0', LLMGW_DATA_DIR: dir, LLMGW_ROUTER_CONFIG_FILE: config, ...env },
    readyWhen: { stdoutMatch: /llmgw-router listening on (http:\/\/127\.0\.0\.1:\d+)/ },
    deadlineMs: 60_000,
  });
  return { proc, base: proc.readyMatch?.[1] as string };
}

/** Starts a streamed chat completion of `tokens` tokens; resolves with the whole SSE text once it ends. */
async function stream(base: string, tokens: number): Promise<{ status: number; text: Promise<string> }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'hello' }], max_tokens: tokens, stream: true }),
  });
  return { status: res.status, text: res.text() };
}

describe('llmgw-router on SIGTERM', () => {
  it('turns /readyz 503 at once and keeps serving for the drain delay, then lets the streams in flight finish and exits 0', async () => {
    const { proc, base } = await startRouter({ LLMGW_ROUTER_DRAIN_DELAY: '1500ms', LLMGW_ROUTER_DRAIN_TIMEOUT: '8s', LLMGW_SHUTDOWN_TIMEOUT: '15s' });
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const first = await stream(base, 20);
    expect(first.status).toBe(200);

    const exited = proc.stop('SIGTERM', 20_000);
    await waitFor(async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 503, { deadlineMs: 5_000, intervalMs: 20, message: '/readyz 503' });
    const ready = (await (await fetch(`${base}/readyz`)).json()) as { checks: Record<string, { ready: boolean; reason?: string }> };
    expect(ready.checks['routing-table']).toEqual({ ready: false, reason: 'shutting down: draining' });
    // Not ready, but still serving while load balancers notice.
    const during = await stream(base, 20);
    expect(during.status).toBe(200);

    // Then new connections are refused, and both streams end complete.
    await waitFor(async () => (await fetch(`${base}/healthz`).then(() => false, () => true)), { deadlineMs: 10_000, intervalMs: 50, message: 'listener closed' });
    for (const s of [first, during]) {
      const text = await s.text;
      expect(text).toContain('data: [DONE]');
      expect(text).not.toContain('"error"');
    }
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(proc.stdout).toContain('drained: nothing in flight');
  }, 60_000);

  it('cuts a stream still running at the drain timeout with an SSE error event, and exits 0', async () => {
    const { proc, base } = await startRouter({ LLMGW_ROUTER_DRAIN_DELAY: '0ms', LLMGW_ROUTER_DRAIN_TIMEOUT: '1s', LLMGW_SHUTDOWN_TIMEOUT: '10s' });
    const long = await stream(base, 200);
    expect(long.status).toBe(200);
    // The first tokens are out: the stream is under way.
    await new Promise((r) => setTimeout(r, 500));
    const exited = proc.stop('SIGTERM', 15_000);
    const text = await long.text;
    expect(text).not.toContain('data: [DONE]');
    expect(text).toMatch(/data: \{"error":\{"message":"[^"]+","type":"[a-z_]+"/);
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(proc.stdout).toContain('drain timeout: cutting the requests still in flight');
  }, 60_000);

  it('refuses a drain that cannot fit in the shutdown deadline, naming both settings', async () => {
    const clean = inheritedTestEnv();
    const proc = await spawnProcess({
      ...runTsEntry('apps/router/src/main.ts'),
      name: 'llmgw-router (bad drain)',
      cleanEnv: true,
      env: { ...clean, LLMGW_ROUTER_PORT: '0', LLMGW_DATA_DIR: dir, LLMGW_ROUTER_DRAIN_DELAY: '5s', LLMGW_ROUTER_DRAIN_TIMEOUT: '5s' },
      deadlineMs: 60_000,
    });
    expect((await proc.exited).code).toBe(1);
    expect(proc.stderr).toContain('LLMGW_ROUTER_DRAIN_DELAY + LLMGW_ROUTER_DRAIN_TIMEOUT (10000 ms) must leave at least 1s of LLMGW_SHUTDOWN_TIMEOUT (10000 ms)');
  }, 60_000);
});
