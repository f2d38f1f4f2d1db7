import type { Queryable } from '../db/db.ts';
import { enqueueEvents } from '../outbox/enqueue.ts';
import { archiveProcState } from '../pipeline/procArchive.ts';
import type { AppContext } from '../app/context.ts';
import { formatLocalTime, localDay } from '../shared/time.ts';
import { purgeEvents } from './events.ts';
import { flightJson } from './json.ts';
import type { FlightState } from './model.ts';
import { purgeSnapLog } from './snapLog.ts';
import { deleteFlights, loadFlightsForUpdate } from './store.ts';

const DAY_MS = 86_400_000;

export interface SweepResult {
  flights: number;
  tombstones: number;
  snapLog: number;
  procArchived: number;
}

/**
 * The daily lifecycle sweep (docs/flights.md "Lifecycle"). Flights silent for the retention period (DELETED
 * included) are copied to flight_hst and removed from the live tables; one that never got an FDEL
 * gets a final event and a tombstone first. Each batch is one transaction: copy, events and delete
 * commit together, so a crash anywhere loses nothing and a rerun copies nothing twice (flight_hst
 * is also unique per flight version). Then old snapshot log rows go, and terminal proc_state rows
 * move to proc_state_hst.
 */
export async function historySweep(ctx: Pick<AppContext, 'db' | 'config' | 'clock'>, opts: { batch?: number } = {}): Promise<SweepResult> {
  const now = ctx.clock.now();
  const { historyRetentionDays, snapLogRetentionDays, procRetentionDays } = ctx.config.lifecycle;
  const cutoff = new Date(now.getTime() - historyRetentionDays * DAY_MS);
  const batch = opts.batch ?? 500;
  const result: SweepResult = { flights: 0, tombstones: 0, snapLog: 0, procArchived: 0 };
  for (;;) {
    const moved = await ctx.db.tx((tx) => sweepBatch(tx, cutoff, now, batch));
    result.flights += moved.flights;
    result.tombstones += moved.tombstones;
    if (moved.flights < batch) break;
  }
  const snapCutoff = new Date(now.getTime() - snapLogRetentionDays * DAY_MS);
  result.snapLog = await purgeSnapLog(ctx.db, snapCutoff, localDay(snapCutoff, ctx.config.timezone));
  result.procArchived = await archiveProcState(ctx.db, { now, retentionDays: procRetentionDays });
  return result;
}

async function sweepBatch(tx: Queryable, cutoff: Date, now: Date, batch: number): Promise<{ flights: number; tombstones: number }> {
  // SKIP LOCKED: a flight the pump holds right now is simply left for the next sweep.
  const c = await tx.query<{ flid: string }>(
    `SELECT flid FROM flight_schd WHERE updated_at < $1 ORDER BY flid LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [cutoff, batch],
  );
  if (c.rows.length === 0) return { flights: 0, tombstones: 0 };
  const flights = [
    ...(
      await loadFlightsForUpdate(
        tx,
        c.rows.map((r) => r.flid),
      )
    ).values(),
  ];
  await copyToHistory(tx, flights, now);
  const live = flights.filter((f) => f.status !== 'DELETED');
  await enqueueEvents(
    tx,
    live.flatMap((f) => purgeEvents(f, now)),
    { now },
  );
  await deleteFlights(
    tx,
    flights.map((f) => f.flid),
  );
  return { flights: flights.length, tombstones: live.length };
}

async function copyToHistory(tx: Queryable, flights: FlightState[], now: Date): Promise<void> {
  await tx.query(
    `INSERT INTO flight_hst (flid, operation_day, state_version, status, state, last_msg_id, updated_at, archived_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::jsonb[], $6::bigint[], $7::timestamptz[])
       CROSS JOIN (SELECT $8::timestamptz) AS a
     ON CONFLICT (flid, operation_day, state_version) DO NOTHING`,
    [
      flights.map((f) => f.flid),
      flights.map((f) => f.operationDay),
      flights.map((f) => f.stateVersion),
      flights.map((f) => f.status),
      flights.map((f) => JSON.stringify(flightJson(f))),
      flights.map((f) => f.lastMsgId),
      flights.map((f) => f.updatedAt),
      now,
    ],
  );
}

/**
 * The version a flight reached before the sweep removed it, as consumers last saw it: the archived
 * version, plus one for the purge tombstone an ACTIVE flight got. A flight sent again after the
 * sweep continues above this, so its version never goes backwards. Flights never archived are absent.
 */
export async function archivedVersionFloors(q: Queryable, flids: string[]): Promise<Map<string, number>> {
  if (flids.length === 0) return new Map();
  const r = await q.query<{ flid: string; floor: number }>(
    `SELECT flid, max(state_version + CASE WHEN status = 'DELETED' THEN 0 ELSE 1 END)::int AS floor
     FROM flight_hst WHERE flid = ANY($1::text[]) GROUP BY flid`,
    [flids],
  );
  return new Map(r.rows.map((x) => [x.flid, x.floor]));
}

const SWEEP_KEY = 'flights.history_sweep_day';

/**
 * Runs the sweep once per airport-local day, at or after MSGX_HISTORY_SWEEP_AT (default 03:30).
 * The day it last ran is kept in msgx_state, so a restart does not run it twice in a day.
 */
export async function historySweepIfDue(ctx: Pick<AppContext, 'db' | 'config' | 'clock'>): Promise<SweepResult | undefined> {
  const now = ctx.clock.now();
  const tz = ctx.config.timezone;
  const today = localDay(now, tz);
  const hhmm = formatLocalTime(now, tz).slice(8, 12);
  if (hhmm < ctx.config.lifecycle.historySweepAt.replace(':', '')) return undefined;
  const last = await ctx.db.query<{ day: string }>(`SELECT value #>> '{}' AS day FROM msgx_state WHERE key = $1`, [SWEEP_KEY]);
  if (last.rows[0]?.day === today) return undefined;
  // Marked after the sweep: a crash mid-sweep retries on the next tick (the sweep is idempotent).
  const result = await historySweep(ctx);
  await ctx.db.query(
    `INSERT INTO msgx_state (key, value, updated_at) VALUES ($1, to_jsonb($2::text), $3)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
    [SWEEP_KEY, today, now],
  );
  return result;
}
