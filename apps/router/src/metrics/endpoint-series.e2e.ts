// The router forgets the metric series of an endpoint that is gone: a replica the controller
// stops listing keeps its counters while its in-flight requests finish, then every series
// carrying its replica id leaves /metrics, and the endpoints it still lists keep theirs.
import type { ServerResponse } from 'node:http';
import { promtoolCheckMetrics, waitFor } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { answerOk, FakeController, FakeUpstream, postJson, protoSnapshot, sampleValue, startRouter, type RouterUnderTest } from '../test/router.harness';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The endpoint-labelled counter families, and one label set each that the test below makes exist. */
const FAMILIES = (endpoint: string, model: string): [string, Record<string, string>][] => [
  ['llmgw_router_endpoint_choices_total', { model, endpoint }],
  ['llmgw_router_upstream_errors_total', { endpoint, kind: 'status_5xx' }],
  ['llmgw_router_breaker_transitions_total', { endpoint, from: 'closed', to: 'open' }],
  ['llmgw_router_breaker_transitions_total', { endpoint, from: 'half-open', to: 'closed' }],
  ['llmgw_router_scrape_errors_total', { endpoint, reason: 'status' }],
];

const answer500 = (_req: unknown, res: ServerResponse): void => void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"boom"}');
const chat = (model: string): object => ({ model, messages: [{ role: 'user', content: 'hi' }] });

async function metricsOf(r: RouterUnderTest): Promise<string> {
  return (await fetch(`${r.url}/metrics`)).text();
}

/** Sends `model` one failing request (the breaker opens: threshold 1), waits out the cooldown, then one that succeeds. */
async function failThenRecover(r: RouterUnderTest, model: string, endpoint: string, u: FakeUpstream): Promise<void> {
  u.respond = answer500;
  expect((await postJson(`${r.url}/v1/chat/completions`, chat(model))).status).toBe(500);
  await waitFor(async () => sampleValue(await metricsOf(r), 'llmgw_router_breaker_state', { endpoint, state: 'half-open' }) === 1, {
    message: `${endpoint}: breaker half-open`,
  });
  u.respond = answerOk;
  expect((await postJson(`${r.url}/v1/chat/completions`, chat(model))).status).toBe(200);
}

describe('metric series of a removed endpoint', () => {
  it('stay while its last request is in flight, then leave /metrics; a kept endpoint keeps its own', async () => {
    const controller = new FakeController();
    await controller.start();
    cleanups.push(() => controller.stop());
    const [a, b] = [await FakeUpstream.start(), await FakeUpstream.start()];
    cleanups.push(() => a.close(), () => b.close());
    // No /metrics on the fake engines: every scrape fails, so both endpoints get scrape-error series.
    const r = await startRouter({
      LLMGW_ROUTER_CONTROLLER: controller.address,
      LLMGW_ROUTER_BREAKER_FAILURES: '1',
      LLMGW_ROUTER_BREAKER_COOLDOWN: '50ms',
      LLMGW_ROUTER_SCRAPE_INTERVAL: '50ms',
    });
    cleanups.push(() => r.close());
    const both = [
      { replicaId: 'replica-a', model: 'm1', url: a.url },
      { replicaId: 'replica-b', model: 'm2', url: b.url },
    ];
    controller.publish(protoSnapshot(1, both, ['m1', 'm2']));
    await waitFor(() => r.core.endpoints.revision === 1, { message: 'first snapshot applied' });

    // 1. Every endpoint-labelled family gets series for both endpoints.
    await failThenRecover(r, 'm1', 'replica-a', a);
    await failThenRecover(r, 'm2', 'replica-b', b);
    const present = (text: string, endpoint: string, model: string): (number | undefined)[] =>
      FAMILIES(endpoint, model).map(([name, labels]) => sampleValue(text, name, labels));
    await waitFor(async () => !present(await metricsOf(r), 'replica-a', 'm1').includes(undefined), { message: 'replica-a has every series' });
    await waitFor(async () => !present(await metricsOf(r), 'replica-b', 'm2').includes(undefined), { message: 'replica-b has every series' });

    // 2. A request to replica-a is held open, and the controller stops listing replica-a.
    a.respond = a.hold;
    const pending = postJson(`${r.url}/v1/chat/completions`, chat('m1'));
    await waitFor(() => a.held.length === 1, { message: 'request held on replica-a' });
    controller.publish(protoSnapshot(2, [both[1]], ['m1', 'm2']));
    await waitFor(() => r.core.endpoints.revision === 2, { message: 'replica-a removed' });
    expect(r.core.endpoints.get('replica-a')).toBeUndefined();
    const draining = await metricsOf(r);
    expect(present(draining, 'replica-a', 'm1')).not.toContain(undefined);
    expect(sampleValue(draining, 'llmgw_router_endpoint_choices_total', { model: 'm1', endpoint: 'replica-a' })).toBe(3);

    // 3. Its last request finishes — cut mid-stream, so the breaker and the upstream-error counter
    //    (a kind not seen before) record it as it ends: every series with its id is gone all the
    //    same; replica-b's are all there.
    for (const h of a.held.splice(0)) {
      h.res.writeHead(200, { 'content-type': 'text/event-stream' });
      h.res.write('data: {"choices":[]}\n\n', () => h.res.destroy());
    }
    const cut = await pending;
    expect([cut.status, cut.text]).toEqual([200, expect.stringContaining('stream_interrupted')]);
    await waitFor(async () => !(await metricsOf(r)).includes('replica-a'), { message: 'replica-a forgotten' });
    const after = await metricsOf(r);
    expect(after).not.toMatch(/endpoint="replica-a"/);
    const kept = present(after, 'replica-b', 'm2');
    expect(kept).not.toContain(undefined);
    // Unchanged, but for scrape errors, which keep counting.
    expect(kept.slice(0, 4)).toEqual(present(draining, 'replica-b', 'm2').slice(0, 4));
    expect(sampleValue(after, 'llmgw_router_endpoint_choices_total', { model: 'm2', endpoint: 'replica-b' })).toBe(2);
    expect(promtoolCheckMetrics(after)).toEqual({ status: 0, output: '' });

    // 4. The same id listed again starts afresh.
    a.respond = answerOk;
    controller.publish(protoSnapshot(3, both, ['m1', 'm2']));
    await waitFor(() => r.core.endpoints.revision === 3, { message: 'replica-a back' });
    expect((await postJson(`${r.url}/v1/chat/completions`, chat('m1'))).status).toBe(200);
    const again = await metricsOf(r);
    expect(sampleValue(again, 'llmgw_router_endpoint_choices_total', { model: 'm1', endpoint: 'replica-a' })).toBe(1);
    expect(sampleValue(again, 'llmgw_router_upstream_errors_total', { endpoint: 'replica-a', kind: 'status_5xx' })).toBeUndefined();
  });
});
