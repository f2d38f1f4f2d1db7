import { writeAudit } from '../audit/audit.ts';
import type { Queryable } from '../db/db.ts';
import { ConfigError } from '../shared/errors.ts';

/**
 * The identity algorithm in force (`MSGX_IDENTITY_DAY_BOUNDARY`, docs/glossary.md "day boundary"). It decides
 * which messages are duplicates, so it is recorded in msgx_state once messages exist, and a start
 * whose MSGX_IDENTITY_DAY_BOUNDARY disagrees is refused: changing it is a deliberate migration
 * (`npx msgx identity --day-boundary on|off`), never a tuning knob flipped by a restart.
 */
const KEY = 'identity.day_boundary';
export const IDENTITY_COMMAND = 'npx msgx identity --day-boundary';

const onOff = (b: boolean) => (b ? 'on' : 'off');

export async function readIdentityMode(q: Queryable): Promise<boolean | undefined> {
  const r = await q.query<{ on: boolean }>(`SELECT (value #>> '{}')::boolean AS on FROM msgx_state WHERE key = $1`, [KEY]);
  return r.rows[0]?.on;
}

async function writeIdentityMode(q: Queryable, on: boolean, now: Date): Promise<void> {
  await q.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, to_jsonb($2::boolean), $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
    [KEY, on, now],
  );
}

/** Has any message been bound to an identity (live or archived)? */
async function messagesExist(q: Queryable): Promise<boolean> {
  const r = await q.query(
    `SELECT 1 FROM proc_state WHERE identity_key IS NOT NULL
     UNION ALL SELECT 1 FROM proc_state_hst WHERE identity_key IS NOT NULL LIMIT 1`,
  );
  return r.rowCount > 0;
}

/**
 * At start: the configured mode must be the recorded one. Nothing recorded yet → the configured
 * mode is recorded (on an empty store), or "off" is (messages bound before this setting existed
 * were bound without the day). A mismatch throws a ConfigError of one line naming the command.
 */
export async function checkIdentityMode(q: Queryable, configured: boolean, now: Date): Promise<void> {
  let recorded = await readIdentityMode(q);
  if (recorded === undefined) {
    recorded = (await messagesExist(q)) ? false : configured;
    await writeIdentityMode(q, recorded, now);
  }
  if (recorded !== configured)
    throw new ConfigError(
      `MSGX_IDENTITY_DAY_BOUNDARY is ${onOff(configured)} but existing messages were identified with it ${onOff(recorded)}; it changes which messages are duplicates, so switch deliberately with \`${IDENTITY_COMMAND} ${onOff(configured)}\` (or set it back)`,
    );
}

/** The migration command: records the new mode and audits who switched it, in one transaction. */
export async function setIdentityMode(
  db: { tx<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  on: boolean,
  actor: string,
  now: Date,
): Promise<{ from: boolean | undefined; to: boolean }> {
  return db.tx(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [KEY]);
    const from = await readIdentityMode(tx);
    await writeIdentityMode(tx, on, now);
    await writeAudit(tx, {
      at: now,
      actor,
      action: 'identity.day-boundary',
      detail: { from: from === undefined ? null : onOff(from), to: onOff(on) },
    });
    return { from, to: on };
  });
}
