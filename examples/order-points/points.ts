import type pg from 'pg';
import type { TxMessageClient } from '../../lib/txmsg/client.ts';
import { TXMSG_ID_HEADER } from '../../lib/txmsg/delivery.ts';

/**
 * The consumer of the example (docs/txmsg.md): a points service. msgx delivers at least once (it
 * redelivers until acked), so applying a message is idempotent on its msgx-txmsg-id: a
 * redelivery adds no points, and is simply acknowledged again.
 */
export const POINTS_DDL = `
CREATE TABLE IF NOT EXISTS ex_points (
  txmsg_id    text PRIMARY KEY,
  user_id     text NOT NULL,
  points      integer NOT NULL,
  order_ref   text NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now()
)`;

/** One record as a Kafka consumer (or the twin's file sink) hands it over. */
export interface ConsumedRecord {
  value: string | null;
  headers: Record<string, string>;
}

export class PointsService {
  constructor(readonly o: { pool: pg.Pool; msgx: TxMessageClient }) {}

  /** Applies the points once, then acks. Throws (and does not ack) when either step fails. */
  async handle(record: ConsumedRecord): Promise<{ txId: string; applied: boolean }> {
    const txId = record.headers[TXMSG_ID_HEADER];
    if (!txId || record.value === null) throw new Error(`not a transactional message: ${TXMSG_ID_HEADER} missing`);
    const p = JSON.parse(record.value) as { userId: string; points: number; orderRef: string };
    const r = await this.o.pool.query(
      `INSERT INTO ex_points (txmsg_id, user_id, points, order_ref) VALUES ($1, $2, $3, $4) ON CONFLICT (txmsg_id) DO NOTHING`,
      [txId, p.userId, p.points, p.orderRef],
    );
    // Ack after the local write committed: a crash in between only causes a redelivery.
    await this.o.msgx.ack(txId);
    return { txId, applied: r.rowCount === 1 };
  }

  async balance(userId: string): Promise<number> {
    const r = await this.o.pool.query<{ total: string | null }>(`SELECT sum(points) AS total FROM ex_points WHERE user_id = $1`, [userId]);
    return Number(r.rows[0]?.total ?? 0);
  }
}
