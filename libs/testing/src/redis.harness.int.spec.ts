import { existsSync } from 'node:fs';
import Redis from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { stopAllSpawned } from './process.harness';
import { redisPing, startRedis, testRedisUrl } from './redis.harness';

afterAll(() => stopAllSpawned());

describe('startRedis', () => {
  it('starts a private redis-server on a free port, serves commands, and stops cleanly', async () => {
    const redis = await startRedis();
    expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
    const client = new Redis(redis.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    try {
      await client.connect();
      expect(await client.ping()).toBe('PONG');
      await client.set('llmgw:test', 'value');
      expect(await client.get('llmgw:test')).toBe('value');
    } finally {
      client.disconnect();
    }
    expect(existsSync(redis.dir)).toBe(true);
    expect(await redis.stop()).toEqual({ code: 0, signal: null });
    expect(existsSync(redis.dir)).toBe(false);
    expect(await redisPing('127.0.0.1', redis.port)).toBe(false);
    await redis.stop();
  });

  it('kill9 takes the server away as an outage would', async () => {
    const redis = await startRedis();
    expect(await redisPing(redis.host, redis.port)).toBe(true);
    expect((await redis.kill9()).signal).toBe('SIGKILL');
    expect(await redisPing(redis.host, redis.port)).toBe(false);
  });

  it('names the binary when redis-server cannot be started', async () => {
    await expect(startRedis({ binary: '/nonexistent/redis-server' })).rejects.toThrow(/spawn failed/);
  });
});

describe('testRedisUrl', () => {
  it('defaults to the local server and follows LLMGW_TEST_REDIS_URL', () => {
    const saved = process.env['LLMGW_TEST_REDIS_URL'];
    try {
      delete process.env['LLMGW_TEST_REDIS_URL'];
      expect(testRedisUrl()).toBe('redis://127.0.0.1:6379');
      process.env['LLMGW_TEST_REDIS_URL'] = 'redis://10.0.0.5:6390/2';
      expect(testRedisUrl()).toBe('redis://10.0.0.5:6390/2');
    } finally {
      if (saved === undefined) delete process.env['LLMGW_TEST_REDIS_URL'];
      else process.env['LLMGW_TEST_REDIS_URL'] = saved;
    }
  });
});
