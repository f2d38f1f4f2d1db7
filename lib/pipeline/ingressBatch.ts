import type { Db } from '../db/db.ts';
import { insertInboundRows } from '../mailbox/pg.ts';
import type { AppContext } from '../app/context.ts';
import { MAILBOX_CHANNEL } from './poller.ts';

/** Bounded so one transaction stays short for the roles that wait behind it. */
const MAX_BATCH = 200;

interface Waiting {
  text: string;
  resolve: (id: number) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for the embedded engine. PGlite runs one statement at a time and every commit costs
 * ~8 ms, so one commit per request caps the twin near 100 requests/s. Requests that arrive while a
 * commit is under way wait and go together in the next transaction: their mailbox rows and the
 * poller's wake-up in one commit. A request is answered only after
 * the commit holding its row, so an answer still means the row is stored. A lone request goes at
 * at the next turn of the event loop.
 */
class GroupCommit {
  readonly #queue: Waiting[] = [];
  #running = false;

  constructor(private readonly ctx: Pick<AppContext, 'db' | 'clock'>) {}

  store(text: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.#queue.push({ text, resolve, reject });
      if (!this.#running) {
        this.#running = true;
        setImmediate(() => void this.#drain());
      }
    });
  }

  /**
   * PGlite runs a whole transaction in microtasks, during which no socket is read: the batch is
   * taken one event-loop turn later (setImmediate, after the poll phase), so every request whose
   * body arrived in the meantime joins it.
   */
  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, MAX_BATCH);
        try {
          const ids = await this.#commit(batch.map((w) => w.text));
          batch.forEach((w, i) => w.resolve(ids[i]!));
        } catch (err) {
          if (batch.length === 1) batch[0]!.reject(err);
          // One bad row (a NUL the database refuses) must not fail the others: each alone.
          else for (const w of batch) await this.#commit([w.text]).then(([id]) => w.resolve(id!), w.reject);
        }
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.#running = false;
    }
  }

  #commit(texts: string[]): Promise<number[]> {
    return this.ctx.db.tx(async (tx) => {
      const ids = await insertInboundRows(tx, texts);
      // Delivered at commit: the poller wakes once for the whole batch.
      await tx.query(`SELECT pg_notify($1, $2)`, [MAILBOX_CHANNEL, String(ids.at(-1))]);
      return ids;
    });
  }
}

const groups = new WeakMap<Db, GroupCommit>();

/** Whether the ingress stores through group commit: embedded engine with the mailbox in it. */
export const groupsInbound = (ctx: Pick<AppContext, 'db' | 'mailbox'>): boolean => ctx.db.kind === 'pglite' && ctx.mailbox.kind === 'pg';

/** Stores one inbound message and enqueues it, sharing the commit with concurrent requests. */
export function storeInboundGrouped(ctx: Pick<AppContext, 'db' | 'clock'>, text: string): Promise<number> {
  let g = groups.get(ctx.db);
  if (!g) groups.set(ctx.db, (g = new GroupCommit(ctx)));
  return g.store(text);
}
