// The router counts a request as waiting for output from the moment it is sent until the
// engine's first response body (a stream's first chunk comes with its first token), and only as
// in flight after that: what the least-load scorer and the prefix-affinity guard weigh. The real
// router in this process (static config), an engine on port 0 that answers a stream's head, then
// its first chunk, then the end, each when the test says.
import type { ServerResponse } from 'node:http';
import { waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeUpstream, startRouter, tempDir, writeRouterConfig } from '../test/router.harness';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('requests waiting for output', () => {
  it('counts a request from its send to its first response body, then only as in flight', async () => {
    const streams: ServerResponse[] = [];
    const engine = await FakeUpstream.start({
      metricsText: '',
      respond: (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        streams.push(res);
      },
    });
    cleanups.push(() => engine.close());
    const config = writeRouterConfig(tempDir(), { models: [{ name: 'm', engine: 'vllm' }], endpoints: [{ id: 'r1', model: 'm', url: engine.url }] });
    const router = await startRouter({ LLMGW_ROUTER_CONFIG_FILE: config });
    cleanups.push(() => router.close());
    const state = router.core.endpoints.get('r1');
    if (state === undefined) throw new Error('endpoint r1 missing');

    const response = fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    // Sent, and the engine has answered its head only: in prefill as far as anyone can tell.
    await waitFor(() => streams.length === 1, { message: 'the engine to receive the request' });
    await new Promise((r) => setTimeout(r, 50));
    expect([state.inFlight, state.awaitingOutput]).toEqual([1, 1]);
    expect(state.candidate(Date.now()).awaitingOutput).toBe(1);

    // The first chunk (the first token): still in flight, no longer waiting for output.
    streams[0].write('data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}\n\n');
    await waitFor(() => state.awaitingOutput === 0, { message: 'the first chunk to end the wait' });
    expect(state.inFlight).toBe(1);

    streams[0].end('data: [DONE]\n\n');
    const res = await response;
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"Hi"');
    await waitFor(() => state.inFlight === 0, { message: 'the request to finish' });
    expect(state.awaitingOutput).toBe(0);
  });
});
