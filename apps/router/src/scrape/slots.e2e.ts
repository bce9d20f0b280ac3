// llama-server's /slots as a load source, through the real router and sim-engine processes: one
// model served by a vLLM replica and two llama.cpp replicas without the KV gauge, one of them
// started with --no-slots. The router learns the first one's capacity from /slots, remembers that
// the second has none without counting it as a failure, and never asks vLLM.
import { stopAllSpawned, waitFor } from '@llmgw/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { postJson, sampleValue, startRouter, startSimEngine, tempDir, writeRouterConfig, type RouterUnderTest } from '../test/router.harness';

let router: RouterUnderTest | undefined;
afterAll(async () => {
  await router?.close();
  await stopAllSpawned();
});

describe('llama.cpp /slots through the router', () => {
  it('reads capacity from /slots, leaves --no-slots and vLLM without one, and counts no scrape error', async () => {
    const llama = ['--engine', 'llamacpp', '--alias', 'm1', '--metrics', '-np', '2', '-c', '4096'];
    const [slots, noSlots, vllm] = await Promise.all([
      startSimEngine(llama, 'sim-llama-slots'),
      startSimEngine([...llama, '--no-slots'], 'sim-llama-no-slots'),
      startSimEngine(['--engine', 'vllm', '--served-model-name', 'm1'], 'sim-vllm'),
    ]);
    const file = writeRouterConfig(tempDir(), {
      models: [{ name: 'm1', engine: 'vllm', routing: { policy: 'least-load' } }],
      endpoints: [
        { id: 'slots', model: 'm1', url: slots.url, engine: 'llamacpp' },
        { id: 'no-slots', model: 'm1', url: noSlots.url, engine: 'llamacpp' },
        { id: 'vllm', model: 'm1', url: vllm.url },
      ],
    });
    // A generous timeout: a scrape slowed by a busy machine must not read as a failure here.
    router = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: file, LLMGW_ROUTER_SCRAPE_INTERVAL: '100ms', LLMGW_ROUTER_SCRAPE_TIMEOUT: '5s' });
    const r = router;
    const state = (id: string) => r.core.endpoints.get(id);
    await waitFor(
      async () => {
        const text = await (await fetch(`${r.url}/metrics`)).text();
        return ['slots', 'no-slots', 'vllm'].every((id) => sampleValue(text, 'llmgw_router_engine_load', { endpoint: id, field: 'running' }) !== undefined) &&
          state('no-slots')?.noSlots === true;
      },
      { deadlineMs: 15_000, message: 'every endpoint scraped, and /slots refused by the --no-slots one' },
    );

    const text = await (await fetch(`${r.url}/metrics`)).text();
    const capacity = (id: string) => sampleValue(text, 'llmgw_router_engine_load', { endpoint: id, field: 'capacity' });
    expect([capacity('slots'), capacity('no-slots'), capacity('vllm')]).toEqual([2, undefined, undefined]);
    expect(sampleValue(text, 'llmgw_router_scrape_errors_total')).toBeUndefined();
    for (const id of ['slots', 'no-slots', 'vllm']) expect(sampleValue(text, 'llmgw_router_scrape_health', { endpoint: id, state: 'ok' }), id).toBe(1);
    expect([state('slots')?.noSlots, state('no-slots')?.noSlots, state('vllm')?.noSlots]).toEqual([false, true, false]);
    expect([state('slots')?.lastSlotsError, state('no-slots')?.lastSlotsError]).toEqual([undefined, undefined]);

    // The capacity reaches the picker's candidates, and requests are served by all three kinds.
    const now = Date.now();
    expect([state('slots')?.candidate(now).maxRunning, state('no-slots')?.candidate(now).maxRunning, state('vllm')?.candidate(now).maxRunning]).toEqual([2, undefined, undefined]);
    for (let i = 0; i < 6; i++) {
      const res = await postJson(`${r.url}/v1/chat/completions`, { model: 'm1', messages: [{ role: 'user', content: `hi ${i}` }], max_tokens: 2 });
      expect(res.status, res.text).toBe(200);
    }
  });
});
