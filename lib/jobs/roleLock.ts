import type { Db, Session } from '../db/db.ts';

/**
 * One advisory lock per role (pump, poller, dispatcher, sweep): at most one instance works a role
 * at a time, a second exits at once. The lock lives on a dedicated session with server-side TCP
 * keepalives and timeouts (see PgDb), so a killed worker's lock is free again within seconds.
 */
export const roleLockKey = (role: string) => `msgx:role:${role}`;

export interface HeldLock {
  session: Session;
  /** Throws when the locking session is gone (then the lock is gone too: stop working). */
  check(): Promise<void>;
  /** The locking session is known to be gone, without asking the server. */
  lost(): boolean;
  release(): Promise<void>;
}

export async function tryRoleLock(db: Db, role: string): Promise<HeldLock | null> {
  const session = await db.session();
  try {
    const r = await session.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(hashtext($1)) AS ok`, [roleLockKey(role)]);
    if (!r.rows[0]?.ok) {
      await session.release();
      return null;
    }
  } catch (err) {
    await session.release();
    throw err;
  }
  let released = false;
  return {
    session,
    async check() {
      if (session.lost()) throw new Error('the role lock session is gone');
      await session.query('SELECT 1');
    },
    lost: () => session.lost(),
    async release() {
      if (released) return;
      released = true;
      await session.query(`SELECT pg_advisory_unlock(hashtext($1))`, [roleLockKey(role)]).catch(() => {});
      await session.release();
    },
  };
}

/**
 * Whether some worker currently holds the role's lock. Used by the ingress to decide whether to
 * start a pump; a transaction-level try-lock never outlives this call.
 */
export async function isRoleLive(db: Db, role: string): Promise<boolean> {
  if (db.kind === 'pglite') return true; // the twin runs every role continuously in-process
  return db.tx(async (tx) => {
    const r = await tx.query<{ free: boolean }>(`SELECT pg_try_advisory_xact_lock(hashtext($1)) AS free`, [roleLockKey(role)]);
    return !r.rows[0]?.free;
  });
}
