import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type pg from 'pg';
import type { TxMessageClient } from '../../lib/txmsg/client.ts';
import { SIGNATURE_HEADER, verifySignature } from '../../lib/shared/signature.ts';

/**
 * The producer of the example (docs/txmsg.md): an order service that grants points through a
 * transactional message. Its own database holds the orders; the message id is stored with the
 * order in the same local transaction, which is what lets the check-back endpoint answer.
 */
export const ORDERS_DDL = `
CREATE TABLE IF NOT EXISTS ex_orders (
  order_ref   text PRIMARY KEY,
  user_id     text NOT NULL,
  amount      integer NOT NULL CHECK (amount > 0),
  txmsg_id    text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
)`;

export interface OrderServiceOptions {
  pool: pg.Pool;
  msgx: TxMessageClient;
  /** This service's check-back URL as msgx will call it, e.g. http://127.0.0.1:7001/tx-check */
  checkUrl: string;
  topic?: string;
  checkAfterMs?: number;
  /** MSGX_SIGNING_SECRET of the msgx it talks to: unsigned check-backs are refused when set. */
  signingSecret?: string;
}

export class OrderService {
  constructor(readonly o: OrderServiceOptions) {}

  /**
   * Prepare → local transaction → commit (TxMessageClient.withTxMessage). An amount ≤ 0 violates
   * the table's CHECK, which is how a failing local transaction looks here.
   */
  async placeOrder(userId: string, amount: number): Promise<{ orderRef: string; txId: string }> {
    const orderRef = randomUUID();
    let txId = '';
    await this.o.msgx.withTxMessage(
      {
        topic: this.o.topic ?? 'points',
        key: userId,
        payload: { version: 1, orderRef, userId, points: amount },
        checkUrl: this.o.checkUrl,
        checkAfterMs: this.o.checkAfterMs,
      },
      async (msg) => {
        txId = msg.id;
        const c = await this.o.pool.connect();
        try {
          await c.query('BEGIN');
          await c.query(`INSERT INTO ex_orders (order_ref, user_id, amount, txmsg_id) VALUES ($1, $2, $3, $4)`, [
            orderRef,
            userId,
            amount,
            msg.id,
          ]);
          await c.query('COMMIT');
        } catch (err) {
          await c.query('ROLLBACK').catch(() => {});
          throw err;
        } finally {
          c.release();
        }
      },
    );
    return { orderRef, txId };
  }

  /**
   * The answer to msgx's check-back. An order carrying the id means the local transaction
   * committed. No order means it failed or never ran: checkAfterMs (default 60 s) is far longer
   * than this service's local transaction, so "not there yet" is not a case.
   */
  async checkStatus(txId: string): Promise<'COMMIT' | 'ROLLBACK'> {
    const r = await this.o.pool.query(`SELECT 1 FROM ex_orders WHERE txmsg_id = $1`, [txId]);
    return r.rowCount ? 'COMMIT' : 'ROLLBACK';
  }

  /** node:http handler for `GET /tx-check?id=…`. */
  async handleHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.o.checkUrl);
    if (req.method !== 'GET' || url.pathname !== new URL(this.o.checkUrl).pathname) return send(res, 404, { error: 'not_found' });
    // Signed over the full URL with a timestamp; older than 5 minutes is a replay (docs/txmsg.md).
    const signed = this.o.signingSecret
      ? verifySignature(this.o.signingSecret, url.toString(), req.headers[SIGNATURE_HEADER] as string | undefined)
      : undefined;
    if (signed && !signed.ok) return send(res, 401, { error: 'bad_signature', detail: signed.reason });
    const id = url.searchParams.get('id');
    if (!id) return send(res, 400, { error: 'id is required' });
    send(res, 200, { status: await this.checkStatus(id) });
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
