import { MemoryLimiter, type Limiter } from '@llmgw/limits';
import { FakeClock } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { BYTES_PER_PROMPT_TOKEN, KeyLimitsStage, tokensToReserve } from './key-limits.stage';

describe('tokensToReserve', () => {
  const body = (o: unknown): Buffer => Buffer.from(JSON.stringify(o));
  const prompt = (b: Buffer): number => Math.ceil(b.length / BYTES_PER_PROMPT_TOKEN);

  it.each([
    ['max_tokens', { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }, 50],
    ['the larger of max_tokens and max_completion_tokens', { model: 'm', max_completion_tokens: 70, max_tokens: 20, messages: [] }, 70],
    ['the estimate without either', { model: 'm', input: 'embed me' }, 1_000],
  ])('reserves %s plus one token per 4 bytes of body for the prompt', (_name, request, completion) => {
    const b = body(request);
    expect(tokensToReserve(b, 1_000)).toBe(completion + prompt(b));
  });

  it('grows with the prompt: a longer prompt reserves more for the same max_tokens', () => {
    const short = body({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 });
    const long = body({ model: 'm', messages: [{ role: 'user', content: 'hi '.repeat(400) }], max_tokens: 10 });
    expect(tokensToReserve(long, 1) - tokensToReserve(short, 1)).toBe(prompt(long) - prompt(short));
    // 1,200 more bytes of prompt: about 300 more tokens reserved.
    expect(prompt(long) - prompt(short)).toBeGreaterThan(290);
  });
});

describe('KeyLimitsStage', () => {
  const key = { name: 'team-a', limits: { requestsPerMinute: 1, tokensPerMinute: 1_000 } };
  const body = Buffer.from('{"model":"m","messages":[],"max_tokens":10}');

  it('decides in the same turn when the limiter has the answer at hand, with the x-ratelimit headers', () => {
    const stage = new KeyLimitsStage(new MemoryLimiter({ clock: new FakeClock(), leaseMs: 1_000 }), 256);
    const first = stage.admit(key, body);
    expect(first).not.toBeInstanceOf(Promise);
    expect(first).toMatchObject({ ticket: { key: 'team-a' }, headers: { 'x-ratelimit-limit-requests': '1', 'x-ratelimit-remaining-requests': '0' } });
    const second = stage.admit(key, body);
    expect(second).toMatchObject({ kind: 'rate_limit_exceeded', headers: { 'retry-after': '60' } });
  });

  it('waits for a limiter that must ask its store', async () => {
    const limiter = new MemoryLimiter({ clock: new FakeClock(), leaseMs: 1_000 });
    const asking: Limiter = { admit: (r) => limiter.admit(r), settle: (t, u) => limiter.settle(t, u), renew: (t) => limiter.renew(t) };
    const decided = new KeyLimitsStage(asking, 256).admit(key, body);
    expect(decided).toBeInstanceOf(Promise);
    expect(await decided).toMatchObject({ ticket: { key: 'team-a' } });
  });
});
