import { ErrorCode } from '@llmgw/domain';
import { FakeClock } from '@llmgw/testing';
import { describe, expect, it } from 'vitest';
import { PUT_ATTEMPTS, TypeormCatalogRepository } from './catalog.repository';
import type { SqlExecutor } from './database.client';

/** An executor whose INSERTs lose the race for the next revision `losses` times (a primary-key violation, as PostgreSQL reports it), then win. */
function racing(losses: number): SqlExecutor & { inserts: number } {
  const db = {
    dialect: 'postgres' as const,
    inserts: 0,
    async query(text: string) {
      if (text.startsWith('INSERT')) {
        db.inserts++;
        if (db.inserts <= losses) throw Object.assign(new Error('duplicate key value violates unique constraint "catalog_revisions_pkey"'), { code: '23505' });
        return { rows: [{ revision: 100 + db.inserts }], affected: 1 };
      }
      return { rows: [{ revision: 100 }], affected: 0 };
    },
  };
  return db;
}

describe('TypeormCatalogRepository.put against racing writers', () => {
  it('an unconditional put lands however many writers win the race before it', async () => {
    // Six writers at once: the last one loses five races. Twenty: nineteen.
    for (const losses of [5, 19]) {
      const db = racing(losses);
      const put = await new TypeormCatalogRepository(db, new FakeClock()).put({ v: 1 }, 'w');
      expect(put.revision).toBe(100 + losses + 1);
      expect(db.inserts).toBe(losses + 1);
    }
  });

  it('gives up only after PUT_ATTEMPTS lost races, with a conflict naming the current revision', async () => {
    const db = racing(PUT_ATTEMPTS);
    await expect(new TypeormCatalogRepository(db, new FakeClock()).put({ v: 1 }, 'w')).rejects.toMatchObject({ code: ErrorCode.Conflict, message: expect.stringContaining('current is 100') });
    expect(db.inserts).toBe(PUT_ATTEMPTS);
  });

  it('a put expecting a revision does not retry: losing the race is its conflict', async () => {
    const db = racing(1);
    await expect(new TypeormCatalogRepository(db, new FakeClock()).put({ v: 1 }, 'w', 100)).rejects.toMatchObject({ code: ErrorCode.Conflict });
    expect(db.inserts).toBe(1);
  });
});
