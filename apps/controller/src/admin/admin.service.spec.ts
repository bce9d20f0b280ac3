import { DomainError, ErrorCode } from '@llmgw/domain';
import { describe, expect, it } from 'vitest';
import { NodeRegistry } from '../nodes/node.registry';
import { ReplicaRegistry } from '../replicas/replica.registry';
import { AdminService, type AdminDeps } from './admin.service';

/** An admin service over one known node; `lead` says what leadership and the term answer. */
function setup(lead: { leader: boolean; leads: boolean; leadsAfterStore?: boolean }) {
  const nodes = new NodeRegistry();
  nodes.register({ id: 'n1', address: '10.0.0.1', labels: {}, gpus: [], cpuCores: 8, memoryBytes: 64, cacheDir: '/c', cacheEntries: [], replicas: [], agentVersion: '' }, 0);
  const stored: string[] = [];
  const deps: Partial<AdminDeps> = {
    nodes,
    replicas: new ReplicaRegistry(),
    leadership: { isLeader: () => lead.leader, leaderElsewhere: async () => undefined, ownerId: 'me' },
    term: { phase: lead.leads ? 'active' : 'loading', leads: () => lead.leads },
    nodeAdmin: {
      forgetNode: async () => undefined,
      setCordon: async (id, action) => {
        stored.push(`${id}:${action}`);
        if (lead.leadsAfterStore !== undefined) lead.leads = lead.leadsAfterStore;
        nodes.setCordoned(id, true, action === 'drain');
        return nodes.get(id) as NonNullable<ReturnType<NodeRegistry['get']>>;
      },
    },
  };
  return { admin: new AdminService(deps as AdminDeps), stored };
}

const refusal = (p: Promise<unknown>): Promise<DomainError> =>
  p.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => e as DomainError,
  );

describe('AdminService node changes', () => {
  it('drains a node on the leader', async () => {
    const { admin, stored } = setup({ leader: true, leads: true });
    const view = await admin.cordon('n1', 'drain');
    expect(view).toMatchObject({ id: 'n1', cordoned: true, draining: true });
    expect(stored).toEqual(['n1:drain']);
  });

  it('refuses a change while the new term loads the store (what it read would overwrite it)', async () => {
    const { admin, stored } = setup({ leader: true, leads: false });
    const error = await refusal(admin.cordon('n1', 'drain'));
    expect(error.code).toBe(ErrorCode.Unavailable);
    expect(error.message).toContain('loading the cluster state');
    expect(stored).toEqual([]);
  });

  it('says so when the lead moved while the change was stored, so the operator sends it to the leader', async () => {
    const { admin, stored } = setup({ leader: true, leads: true, leadsAfterStore: false });
    const error = await refusal(admin.cordon('n1', 'cordon'));
    expect(error.code).toBe(ErrorCode.Unavailable);
    expect(error.message).toContain("the lead moved while 'cordon' was stored");
    expect(stored).toEqual(['n1:cordon']);
  });

  it('a standby refuses and names where changes go', async () => {
    const { admin } = setup({ leader: false, leads: false });
    expect((await refusal(admin.cordon('n1', 'uncordon'))).message).toContain('this controller is a standby');
  });
});
