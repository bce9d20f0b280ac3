// Hot reload end to end: a model added through the catalog REST API becomes a ready replica and
// answers the official openai client through the router, and deleting it tears the replica down
// and the router forgets it — while every process (controller, catalog API, router, agent) keeps
// running with the pid it started with. Apps as processes on free ports, temporary data dir.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { processExists, stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ENV, cmdline, describeCluster, TestCluster, type AgentHandle, type AppHandle } from './cluster.harness';

const MODEL = 'hot-model';
const TOKEN = 'e2e-admin-token-0123456789';
const cluster = new TestCluster();
let router: AppHandle;
let catalog: AppHandle;
let agent: AgentHandle;
let pids: Map<string, number>;

/** A catalog API call with the admin token; the parsed body (or undefined) and the status. */
async function catalogApi(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${catalog.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Engine processes (sim-engine stands in for vLLM) below the agent serving `model`, by pid. */
function engines(model: string): number[] {
  return cluster
    .descendants(agent)
    .filter((p) => {
      const argv = cmdline(p.pid);
      return argv.some((a) => a.includes('sim-engine')) && argv.includes(model);
    })
    .map((p) => p.pid);
}

/** Throws with every app's recent output when `fn` fails, so a timeout says what the cluster did. */
async function explained<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${describeCluster(cluster)}`);
  }
}

beforeAll(async () => {
  // No catalog file: the store holds no catalog until the API writes one.
  await cluster.startController({ LLMGW_CONTROLLER_SETTLE: '1s', LLMGW_CONTROLLER_TICK: '250ms', LLMGW_CONTROLLER_BACKOFF_MIN: '500ms' });
  [router, catalog, agent] = await Promise.all([
    cluster.startRouter({ LLMGW_ROUTER_SCRAPE_INTERVAL: '250ms' }),
    cluster.startCatalog({ LLMGW_CATALOG_ADMIN_TOKEN: TOKEN }),
    cluster.startAgent('gpu-a', { [AGENT_ENV.fakeGpus]: '8xH100-80GB', [AGENT_ENV.engineOverride]: 'sim' }),
  ]);
  pids = new Map(cluster.apps.map((a) => [a.name, a.proc.pid]));
  await explained(() => waitFor(async () => (await cluster.nodes()).some((n) => n.connected), { deadlineMs: 30_000, intervalMs: 100, message: 'the agent registered' }));
}, 120_000);

afterAll(async () => {
  const left = await cluster.stop(5_000);
  await stopAllSpawned();
  expect(left.map((p) => `${p.pid} ${p.comm}`), 'no process left running').toEqual([]);
}, 60_000);

/** Every app still runs as the process it started as. */
function expectSamePids(): void {
  for (const app of cluster.apps) {
    expect(app.proc.pid, `${app.name} pid`).toBe(pids.get(app.name));
    expect(processExists(app.proc.pid), `${app.name} (pid ${app.proc.pid}) still running`).toBe(true);
  }
}

describe('hot reload through the catalog API', () => {
  const client = (): OpenAI => new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'not-checked', maxRetries: 0, timeout: 10_000 });

  it('starts with no catalog model and the router not knowing the model', async () => {
    const res = await catalogApi('GET', '/v1/catalog');
    expect(res.status).toBe(200);
    expect((res.body as { models: unknown[] }).models).toEqual([]);
    await expect(client().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('serves a model added through the API, with no process restarted', async () => {
    const weights = join(cluster.dataDir, 'hot-model.safetensors');
    writeFileSync(weights, Buffer.alloc(4096, 1));
    const put = await catalogApi('PUT', `/v1/catalog/models/${MODEL}`, {
      name: MODEL,
      source: `file://${weights}`,
      size: '4KB',
      replicas: 1,
      profiles: [{ engine: 'vllm', gpuClass: 'H100-80GB', gpusPerNode: 1, args: ['--output-tokens', '8', '--output-jitter', '0'] }],
    });
    expect(put.status, JSON.stringify(put.body)).toBe(201);

    const res = await explained(() =>
      waitFor(
        async () => {
          const r = await client().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 8 });
          return r.object === 'chat.completion' ? r : undefined;
        },
        { deadlineMs: 45_000, intervalMs: 250, message: `${MODEL} answering through the router` },
      ),
    );
    expect(res.choices).toHaveLength(1);
    expect(typeof res.choices[0].message.content).toBe('string');
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);

    const ready = (await cluster.replicas(MODEL)).filter((r) => r.state === 'ready');
    expect(ready.map((r) => r.engine)).toEqual(['vllm']);
    expect(engines(MODEL), 'one engine process under the agent').toHaveLength(1);
    expectSamePids();
  }, 60_000);

  it('tears the replica down when the model is deleted through the API, with no process restarted', async () => {
    const enginePids = engines(MODEL);
    expect(enginePids).toHaveLength(1);
    const del = await catalogApi('DELETE', `/v1/catalog/models/${MODEL}`);
    expect(del.status, JSON.stringify(del.body)).toBeLessThan(300);

    await explained(() =>
      waitFor(async () => (await cluster.replicas(MODEL)).length === 0 && !processExists(enginePids[0]), {
        deadlineMs: 30_000,
        intervalMs: 100,
        message: `${MODEL}'s replica stopped and its engine (pid ${enginePids[0]}) gone`,
      }),
    );
    expect(engines(MODEL)).toEqual([]);
    await explained(() =>
      waitFor(
        async () => {
          try {
            await client().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
            return false;
          } catch (error) {
            return error instanceof OpenAI.NotFoundError;
          }
        },
        { deadlineMs: 15_000, intervalMs: 100, message: `the router answering 404 for ${MODEL}` },
      ),
    );
    expectSamePids();
  }, 60_000);
});
