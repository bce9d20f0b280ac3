import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ControlPlane, type ControlPlaneParts } from './control-plane.service';

/** A control plane whose first lease claim is answered while the standby read runs (as at most starts). */
function setup() {
  const calls: string[] = [];
  let leader = false;
  let loaded: () => void = () => undefined;
  const loading = new Promise<void>((resolve) => (loaded = resolve));
  const parts: ControlPlaneParts = {
    config: { joinToken: 'j', routerToken: 'r', catalogFile: undefined },
    catalog: { start: async () => undefined, onSwap: () => undefined },
    leadership: { start: () => void calls.push('claim sent'), stop: async () => undefined, isLeader: () => leader },
    term: {
      whenLoaded: async () => {
        calls.push('waits for the load');
        await loading;
      },
      refreshStandby: async () => {
        calls.push('standby read');
        leader = true; // the claim's answer came in meanwhile
      },
      stop: () => undefined,
    },
    nodes: { onChange: () => undefined },
    replicas: { onChange: () => undefined },
    publisher: { open: () => void calls.push('publisher open'), schedule: () => undefined },
    reconciler: { capacityChanged: () => undefined },
    loop: { start: () => void calls.push('tick'), stop: async () => undefined, requestPass: () => undefined },
    persister: { flush: async () => undefined },
    commands: { closeAll: () => undefined },
  };
  return { plane: new ControlPlane(parts, pino({ level: 'silent' })), calls, loaded: () => loaded() };
}

describe('ControlPlane.start', () => {
  it('a controller that became leader during its standby read publishes only once the state is loaded', async () => {
    const { plane, calls, loaded } = setup();
    const started = plane.start();
    await new Promise((r) => setTimeout(r, 0));
    expect(calls).toEqual(['claim sent', 'standby read', 'waits for the load']);
    loaded();
    await started;
    expect(calls).toEqual(['claim sent', 'standby read', 'waits for the load', 'publisher open', 'tick']);
  });
});
