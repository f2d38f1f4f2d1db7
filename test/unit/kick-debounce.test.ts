import { describe, expect, it } from 'vitest';
import type { Db } from '../../lib/db/db.ts';
import { debouncedKicks, KICK_DEBOUNCE_MS } from '../../lib/jobs/kick.ts';

/** A database where the pipeline is not paused and every role's lock is free: each probe would kick. */
const idleDb = {
  kind: 'pg',
  query: async () => ({ rows: [] }),
  tx: async (fn: (q: unknown) => Promise<unknown>) => fn({ query: async () => ({ rows: [{ free: true }] }) }),
} as unknown as Db;

describe("the ingress's kicks", () => {
  it('start each role at most once per debounce window, never a role switched off', async () => {
    let now = 0;
    const invoked: string[] = [];
    const kick = debouncedKicks({
      targets: { poller: 'poller-fn', pump: 'pump-fn', dispatcher: 'dispatcher-fn' },
      disabled: ['dispatcher'],
      invoke: async (fn) => void invoked.push(fn),
      now: () => now,
    });
    const fail = (role: string, err: unknown) => expect.fail(`${role}: ${String(err)}`);
    for (let i = 0; i < 100; i++) await kick(idleDb, fail); // a burst within one window
    expect(invoked.sort()).toEqual(['poller-fn', 'pump-fn']);
    now += KICK_DEBOUNCE_MS - 1;
    await kick(idleDb, fail);
    expect(invoked).toHaveLength(2);
    now += 1;
    await kick(idleDb, fail);
    expect(invoked).toHaveLength(4);
  });

  it('a failed invoke is reported, not thrown', async () => {
    const errors: string[] = [];
    const kick = debouncedKicks({
      targets: { pump: 'pump-fn' },
      disabled: [],
      invoke: async () => {
        throw new Error('throttled');
      },
    });
    await kick(idleDb, (role, err) => errors.push(`${role}: ${(err as Error).message}`));
    expect(errors).toEqual(['pump: throttled']);
  });
});
