import type { Queryable } from '../db/db.ts';
import { listDead, type DeadFilter } from './store.ts';
import { toView, type TxMessageView } from './view.ts';

export type { DeadFilter } from './store.ts';

/** The txmsg part of `GET /admin/dead?kind=txmsg`: DEAD messages with why and where they died. */
export async function deadTxMessages(
  db: Queryable,
  filter: DeadFilter = {},
): Promise<(TxMessageView & { deadPhase: 'check' | 'delivery' | null })[]> {
  const rows = await listDead(db, filter);
  return rows.map((r) => ({ ...toView(r), deadPhase: r.dead_phase }));
}
