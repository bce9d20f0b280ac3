import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { checkPorts, pickFreePort } from './port.checker';

describe('checkPorts', () => {
  const servers: Server[] = [];
  afterAll(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

  it('names a taken port, the app and the variable that moves it; free ports pass', async () => {
    const taken = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => resolve((s.address() as { port: number }).port));
      servers.push(s);
    });
    const free = await pickFreePort('127.0.0.1');
    expect(await checkPorts('127.0.0.1', [{ port: free, variable: 'LLMGW_AGENT_PORT', app: 'agent' }])).toEqual([]);
    expect(
      await checkPorts('127.0.0.1', [
        { port: taken, variable: 'LLMGW_ROUTER_PORT', app: 'router' },
        { port: free, variable: 'LLMGW_AGENT_PORT', app: 'agent' },
        { port: free, variable: 'LLMGW_CATALOG_PORT', app: 'catalog API' },
      ]),
    ).toEqual([
      `port ${taken} on 127.0.0.1 for the router is already in use: stop whatever holds it, or set LLMGW_ROUTER_PORT to a free port`,
      `port ${free} is set for both agent (LLMGW_AGENT_PORT) and catalog API (LLMGW_CATALOG_PORT); give each its own`,
    ]);
  });
});
