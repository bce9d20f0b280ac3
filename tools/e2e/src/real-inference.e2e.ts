// Real CPU inference through the whole path: the official openai client -> router -> the llama.cpp
// replica the controller placed on the agent, running the project's tiny GGUF on node-llama-cpp
// (or llama-server when installed). Apps as processes on free ports, temporary data directory.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { repoRoot, waitFor } from '@llmgw/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTinyModel } from '../../gguf/src/tiny-model';
import { renderCatalog } from '../../launcher/src/local-catalog.writer';
import { probeServing } from '../../launcher/src/serving.probe';
import { AGENT_ENV, cmdline, describeCluster, TestCluster, type AgentHandle } from './cluster.harness';

const MODEL = 'llmgw-tiny';
const cluster = new TestCluster();
let client: OpenAI;
let agent: AgentHandle;

beforeAll(async () => {
  cluster.writeFile(join('models', 'llmgw-tiny.gguf'), buildTinyModel());
  const template = readFileSync(join(repoRoot(), 'deploy', 'local', 'catalog.yaml'), 'utf8');
  const catalogFile = cluster.writeFile('catalog.yaml', renderCatalog(template, { LLMGW_DATA_DIR: cluster.dataDir }, 'deploy/local/catalog.yaml').yaml);
  await cluster.startController({ LLMGW_CONTROLLER_CATALOG_FILE: catalogFile, LLMGW_CONTROLLER_SETTLE: '1s', LLMGW_CONTROLLER_TICK: '250ms' });
  const [router, cpuAgent] = await Promise.all([
    cluster.startRouter(),
    // No llama-server here: the agent falls back to the bundled node-llama-cpp engine; name it anyway.
    cluster.startAgent('cpu-agent', { [AGENT_ENV.llamaServer]: join(repoRoot(), 'tools', 'llama-engine', 'bin', 'llama-server-node') }),
  ]);
  agent = cpuAgent;
  const base = `${router.url}/v1`;
  try {
    await waitFor(async () => (await probeServing(base, MODEL)).ready, { deadlineMs: 150_000, intervalMs: 500, message: `${MODEL} served through the router` });
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${describeCluster(cluster)}`);
  }
  client = new OpenAI({ baseURL: base, apiKey: 'not-checked', maxRetries: 0, timeout: 60_000 });
}, 240_000);

// Engines outlive their agent by design (a restarted agent re-adopts them): stop() kills what is left.
afterAll(() => cluster.stop(), 60_000);

describe('real inference on the CPU through the router', () => {
  it('was placed by the controller on the agent as a llama.cpp replica on the real engine', async () => {
    const replicas = await cluster.replicas(MODEL);
    expect(replicas.filter((r) => r.state === 'ready').map((r) => r.engine)).toEqual(['llamacpp']);
    const engines = cluster.descendants(agent).filter((p) => cmdline(p.pid).some((a) => a.includes('llama-engine') || a.endsWith('llama-server')));
    expect(engines.length, 'an engine process under the agent').toBeGreaterThan(0);
  });

  it('answers a chat completion from the openai client', async () => {
    const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], max_tokens: 16 });
    expect(res.object).toBe('chat.completion');
    expect(res.choices).toHaveLength(1);
    expect(typeof res.choices[0].message.content).toBe('string');
    expect(['stop', 'length']).toContain(res.choices[0].finish_reason);
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
    expect(res.usage?.prompt_tokens).toBeGreaterThan(0);
  }, 60_000);

  it('streams a chat completion to the openai client, with usage', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Count to five' }],
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let completionTokens: number | undefined;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object).toBe('chat.completion.chunk');
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      completionTokens = chunk.usage?.completion_tokens ?? completionTokens;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(['stop', 'length']).toContain(finish);
    expect(completionTokens).toBeGreaterThan(0);
    expect(typeof text).toBe('string');
  }, 60_000);
});
