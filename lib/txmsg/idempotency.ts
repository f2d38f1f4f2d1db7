import { createHash } from 'node:crypto';
import type { Queryable } from '../db/db.ts';

/** All SQL on tx_idempotency: an Idempotency-Key names at most one message, forever. */

/**
 * Claims `key` for `txId`. Returns undefined when the claim is ours, else the earlier claim.
 * A concurrent claim of the same key waits on the unique index until the first commits, so two
 * racing prepares cannot both create a message.
 */
export async function claimKey(
  q: Queryable,
  key: string,
  txId: string,
  requestHash: string,
  now: Date,
): Promise<{ tx_id: string; request_hash: string } | undefined> {
  const ins = await q.query(
    `INSERT INTO tx_idempotency (idem_key, tx_id, request_hash, created_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (idem_key) DO NOTHING`,
    [key, txId, requestHash, now],
  );
  if (ins.rowCount === 1) return undefined;
  const r = await q.query<{ tx_id: string; request_hash: string }>(`SELECT tx_id, request_hash FROM tx_idempotency WHERE idem_key = $1`, [
    key,
  ]);
  return r.rows[0];
}

/** A hash of the request that ignores key order, so the same body re-serialised still matches. */
export function requestHash(body: unknown): string {
  return createHash('sha256').update(stableJson(body)).digest('hex');
}

function stableJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stableJson(o[k])}`)
    .join(',')}}`;
}
