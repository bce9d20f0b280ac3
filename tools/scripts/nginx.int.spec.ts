// deploy/nginx/llmgw.conf as Debian's nginx reads it: `nginx -t` accepts it for N routers, and it
// keeps the settings the router fleet relies on.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { nginxPrefix, nginxTest, repoRoot } from '@llmgw/testing';
import { afterEach, describe, expect, it } from 'vitest';

const removals: (() => void)[] = [];
afterEach(() => removals.splice(0).forEach((r) => r()));

describe('deploy/nginx', () => {
  it.each([1, 3, 8])('nginx -t accepts llmgw.conf in front of %i routers', async (n) => {
    const prefix = await nginxPrefix(Array.from({ length: n }, (_, i) => `127.0.0.1:${18_100 + i}`));
    removals.push(() => prefix.remove());
    expect(nginxTest(prefix)).toContain('test is successful');
  });

  it('nginx -t accepts the example router list as shipped', async () => {
    const prefix = await nginxPrefix([]);
    removals.push(() => prefix.remove());
    const shipped = readFileSync(join(repoRoot(), 'deploy', 'nginx', 'llmgw-routers.upstream'), 'utf8');
    expect(shipped).toMatch(/^server \S+:8080 max_fails=1 fail_timeout=5s;$/m);
    writeFileSync(join(prefix.dir, 'llmgw-routers.upstream'), shipped);
    expect(nginxTest(prefix)).toContain('test is successful');
  });

  it('keeps what the fleet relies on: streaming unbuffered, keep-alive upstreams, retries only before a response starts', () => {
    const conf = readFileSync(join(repoRoot(), 'deploy', 'nginx', 'llmgw.conf'), 'utf8');
    for (const line of [
      'proxy_buffering off;',
      'proxy_request_buffering on;',
      'proxy_http_version 1.1;',
      'proxy_set_header Connection "";',
      'keepalive 64;',
      'proxy_next_upstream error timeout http_503 non_idempotent;',
    ]) {
      expect(conf).toContain(line);
    }
  });

  it('a refused configuration is reported with what nginx said', async () => {
    const prefix = await nginxPrefix(['127.0.0.1:18100']);
    removals.push(() => prefix.remove());
    writeFileSync(join(prefix.dir, 'llmgw-routers.upstream'), 'server 127.0.0.1:18100 max_fails=one;\n');
    expect(() => nginxTest(prefix)).toThrow(/nginx -t refused the configuration: .*invalid parameter "max_fails=one"/s);
  });
});
