import { describe, expect, it } from 'vitest';
import type { NodeAuthentication } from './node-credential.service';
import { NodeIdentities } from './node-identity.service';

/** Credentials whose answers the test releases by hand. */
function heldCredentials() {
  const waiting: ((a: NodeAuthentication) => void)[] = [];
  return {
    waiting,
    credentials: {
      authenticate: () => new Promise<NodeAuthentication>((resolve) => waiting.push(resolve)),
      release: () => Promise.resolve(),
    },
  };
}

describe('NodeIdentities', () => {
  it('a check answers as the credentials do while nothing is forgotten', async () => {
    const { credentials, waiting } = heldCredentials();
    const ids = new NodeIdentities(credentials);
    const check = ids.authenticate('n1', 's');
    waiting[0]({ ok: true });
    await expect(check).resolves.toEqual({ ok: true });
  });

  it('no check runs while the id is being forgotten, and the id is accepted again after', async () => {
    const { credentials, waiting } = heldCredentials();
    const ids = new NodeIdentities(credentials);
    let release!: () => void;
    const forgetting = ids.forget('n1', () => new Promise<void>((r) => (release = r)));
    await Promise.resolve();
    expect(ids.isForgetting('n1')).toBe(true);
    await expect(ids.authenticate('n1', 's')).rejects.toThrow(/being forgotten/);
    expect(waiting).toHaveLength(0);
    release();
    await forgetting;
    expect(ids.isForgetting('n1')).toBe(false);
    const again = ids.authenticate('n1', 's');
    waiting[0]({ ok: true, issued: 'x' });
    await expect(again).resolves.toEqual({ ok: true, issued: 'x' });
  });

  it('a forget waits for a check in flight before removing, and voids that check', async () => {
    const { credentials, waiting } = heldCredentials();
    const ids = new NodeIdentities(credentials);
    const check = ids.authenticate('n1', 's');
    const order: string[] = [];
    const forgetting = ids.forget('n1', async () => {
      order.push('removed');
    });
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    waiting[0]({ ok: true });
    await expect(check).rejects.toThrow(/forgotten while its identity was checked/);
    await forgetting;
    expect(order).toEqual(['removed']);
  });
});
