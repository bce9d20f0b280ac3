import { DomainError, ErrorCode } from '@llmgw/domain';
import type { NodeRegistration } from '@llmgw/control';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { NodeAdminService } from './node-admin.service';
import { NodeIdentities } from './node-identity.service';
import { NodeRegistry } from './node.registry';

function registration(id: string): NodeRegistration {
  return { id, address: '10.0.0.1', labels: {}, gpus: [], cpuCores: 8, memoryBytes: 64, cacheDir: '/c', cacheEntries: [], replicas: [], agentVersion: '' };
}

/** A node admin over a registry holding one lost node, whose persister's idle() waits for `flushed()`. */
function setup() {
  const nodes = new NodeRegistry();
  nodes.register(registration('n1'), 0);
  nodes.disconnected('n1');
  nodes.checkHealth(10_000, { unreachableAfterMs: 1_000, lostAfterMs: 5_000 });
  const removed: string[] = [];
  const lead = { held: true };
  let flushed: () => void = () => undefined;
  const idle = new Promise<void>((resolve) => (flushed = resolve));
  const admin = new NodeAdminService(
    {
      nodes,
      store: { nodes: { remove: async (id: string) => removed.push(id) > 0, upsert: async () => undefined, setCordoned: async () => undefined } },
      commands: { connected: () => false },
      identities: new NodeIdentities({ authenticate: async () => ({ ok: true }), release: async () => undefined }),
      persister: { idle: () => idle },
      capacityChanged: () => undefined,
      requestPass: () => undefined,
      recordEvent: () => undefined,
      leads: () => lead.held,
    },
    pino({ level: 'silent' }),
  );
  return { admin, nodes, removed, lead, flushed: () => flushed() };
}

describe('NodeAdminService.forgetNode', () => {
  it('removes a lost node while leading', async () => {
    const { admin, nodes, removed, flushed } = setup();
    expect(nodes.get('n1')?.info.state).toBe('lost');
    const forgetting = admin.forgetNode('n1');
    flushed();
    await forgetting;
    expect(removed).toEqual(['n1']);
    expect(nodes.get('n1')).toBeUndefined();
  });

  it('removes nothing when the lead is lost while it waits for a flush: the node may be back with the new leader', async () => {
    const { admin, nodes, removed, lead, flushed } = setup();
    const forgetting = admin.forgetNode('n1');
    lead.held = false;
    flushed();
    const error = await forgetting.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).code).toBe(ErrorCode.Unavailable);
    expect((error as DomainError).message).toContain("the lead moved before node 'n1' was forgotten");
    expect(removed).toEqual([]);
    expect(nodes.get('n1')).toBeDefined();
  });
});
