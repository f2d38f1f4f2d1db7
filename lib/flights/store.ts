import type { Item } from '../codec/message.ts';
import { RESOURCE_KINDS, type ResourceKind, SCALARS, type ScalarName, TIME_SCALARS } from '../codec/vocabulary.ts';
import type { XmlNode } from '../codec/xml.ts';
import type { Queryable } from '../db/db.ts';
import { prepared } from '../db/prepared.ts';
import { collectionFilter, DETAIL_TABLES, keyExpr, SCALAR_COLUMNS, TIME_COLUMNS, toInstant } from './tables.ts';
import { emptyResources, type FlightState } from './model.ts';
import { type FlightStateCache, rowVersion } from './stateCache.ts';

/** All SQL on flight_schd and the detail tables. Set-based: one statement for any number of flights. */

interface Row {
  flid: string;
  operation_day: string;
  extra: XmlNode[];
  status: FlightState['status'];
  state_version: number;
  last_msg_id: number | null;
  src_dttm: Date | null;
  created_at: Date;
  updated_at: Date;
  res: Record<string, [string, XmlNode[]][] | null>;
  [col: string]: unknown;
}

// Each flight's detail rows come back as one jsonb object {KIND: [[key, item], …]} in received
// order, so a read of N flights is a single query, never one query per flight or per kind.
const DETAILS = `jsonb_build_object(${RESOURCE_KINDS.map((k) => {
  const t = DETAIL_TABLES[k];
  return `'${k}', (SELECT jsonb_agg(jsonb_build_array(${keyExpr(t, 'd')}, d.item) ORDER BY d.ord) FROM ${t.table} d WHERE d.flid = f.flid${collectionFilter(t, 'd')})`;
}).join(', ')}) AS res`;

const SELECT = `SELECT f.flid, f.operation_day, ${SCALAR_COLUMNS.map((c) => `f.${c}`).join(', ')}, f.extra, f.status,
  f.state_version, f.last_msg_id, f.src_dttm, f.created_at, f.updated_at, ${DETAILS} FROM flight_schd f`;

function fromRow(r: Row): FlightState {
  const scalars: Partial<Record<ScalarName, string>> = {};
  SCALARS.forEach((s, i) => {
    const v = r[SCALAR_COLUMNS[i]!];
    if (v !== null && v !== undefined) scalars[s] = v as string;
  });
  const resources = emptyResources();
  for (const k of RESOURCE_KINDS) resources[k] = (r.res[k] ?? []).map(([key, nodes]): Item => ({ key, nodes }));
  return {
    flid: r.flid,
    operationDay: r.operation_day,
    scalars,
    resources,
    extra: r.extra,
    status: r.status,
    stateVersion: r.state_version,
    lastMsgId: r.last_msg_id,
    srcDttm: r.src_dttm,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

// The reads by FLID list, prepared: each FLID is looked up by primary key in the order given, so
// the plan stays a key look-up even when the server plans it once for all values and has no
// statistics yet (a generic plan of `flid = ANY($1)` on a fresh table scanned it whole).
const byFlidList = (lock: string) =>
  prepared(
    SELECT.replace(
      ' FROM flight_schd f',
      ` FROM unnest($1::text[]) WITH ORDINALITY AS k(flid, ord) CROSS JOIN LATERAL (SELECT * FROM flight_schd s WHERE s.flid = k.flid${lock}) f`,
    ) + ' ORDER BY k.ord',
  );
const LOCKED_BY_FLID = byFlidList(' FOR UPDATE');
const READ_BY_FLID = byFlidList('');

// With a cache: lock first and learn each row's version, then read in full only the flights the
// cache does not hold at that version (the pump's groups mostly touch flights it wrote itself).
const LOCK_VERSIONS = prepared(
  `SELECT f.flid, f.version FROM unnest($1::text[]) WITH ORDINALITY AS k(flid, ord)
   CROSS JOIN LATERAL (SELECT s.flid, ${rowVersion('s')} AS version
                       FROM flight_schd s WHERE s.flid = k.flid FOR UPDATE) f ORDER BY k.ord`,
);

/**
 * The current state of these flights, locked for the rest of the transaction (in FLID order).
 * With `cache`, flights it holds at their current row version are not read again.
 */
export async function loadFlightsForUpdate(q: Queryable, flids: string[], cache?: FlightStateCache): Promise<Map<string, FlightState>> {
  if (flids.length === 0) return new Map();
  const sorted = [...new Set(flids)].sort();
  if (!cache) {
    const r = await q.query<Row>(LOCKED_BY_FLID, [sorted]);
    return new Map(r.rows.map((row) => [row.flid, fromRow(row)]));
  }
  const locked = (await q.query<{ flid: string; version: string }>(LOCK_VERSIONS, [sorted])).rows;
  const out = new Map<string, FlightState>();
  const unknown = new Map<string, string>(); // FLID → its row version, for flights to read in full
  for (const { flid, version } of locked) {
    const state = cache.get(flid, version);
    if (state) out.set(flid, state);
    else unknown.set(flid, version);
  }
  if (unknown.size > 0) {
    // Already locked above, so the row cannot have moved on since its version was read.
    for (const row of (await q.query<Row>(READ_BY_FLID, [[...unknown.keys()]])).rows) {
      const state = fromRow(row);
      out.set(row.flid, state);
      cache.set(row.flid, unknown.get(row.flid)!, state);
    }
  }
  return out;
}

export async function readFlight(q: Queryable, flid: string): Promise<FlightState | undefined> {
  const r = await q.query<Row>(`${SELECT} WHERE f.flid = $1`, [flid]);
  return r.rows[0] ? fromRow(r.rows[0]) : undefined;
}

export async function readFlightsOfDay(q: Queryable, day: string): Promise<FlightState[]> {
  const r = await q.query<Row>(`${SELECT} WHERE f.operation_day = $1 ORDER BY f.flid`, [day]);
  return r.rows.map(fromRow);
}

/**
 * A page of every flight in the live tables, by (operation day, FLID): optionally one day and one
 * status, after a (day, FLID) cursor. The index on (operation_day, flid) serves every form.
 */
export async function readFlightsPage(
  q: Queryable,
  o: { day?: string; status?: FlightState['status']; after?: [string, string]; limit: number },
): Promise<FlightState[]> {
  const r = await q.query<Row>(
    `${SELECT}
     WHERE ($1::text IS NULL OR f.operation_day = $1) AND ($2::text IS NULL OR f.status = $2)
       AND ($3::text IS NULL OR (f.operation_day, f.flid) > ($3::text, $4::text))
     ORDER BY f.operation_day, f.flid LIMIT $5`,
    [o.day ?? null, o.status ?? null, o.after?.[0] ?? null, o.after?.[1] ?? null, o.limit],
  );
  return r.rows.map(fromRow);
}

export interface FlightWrite {
  /** The next state; its flight_schd row is always written (new version, last message). */
  state: FlightState;
  /** The collections that changed: only their detail rows are touched. */
  kinds: ResourceKind[];
}

/**
 * Writes the changed flights in one statement: every changed main row (new version, last message),
 * and for each resource kind that changed, an upsert of the new items plus a delete of items no
 * longer present. Old and new keys never overlap between the two, so they cannot collide.
 */
export async function writeFlights(q: Queryable, writes: FlightWrite[], tz: string, cache?: FlightStateCache): Promise<void> {
  if (writes.length === 0) return;
  const params: unknown[] = [];
  const p = (v: unknown) => (params.push(v), `$${params.length}`);
  const states = writes.map((w) => w.state);

  const mainCols = [
    'flid',
    'operation_day',
    ...SCALAR_COLUMNS,
    ...TIME_COLUMNS,
    'extra',
    'status',
    'state_version',
    'last_msg_id',
    'src_dttm',
    'created_at',
    'updated_at',
  ];
  const mainArrays: [unknown[], string][] = [
    [states.map((s) => s.flid), 'text'],
    [states.map((s) => s.operationDay), 'text'],
    ...SCALARS.map((name): [unknown[], string] => [states.map((s) => s.scalars[name] ?? null), 'text']),
    ...TIME_SCALARS.map((name): [unknown[], string] => [states.map((s) => toInstant(s.scalars[name], tz)), 'timestamptz']),
    [states.map((s) => JSON.stringify(s.extra)), 'jsonb'],
    [states.map((s) => s.status), 'text'],
    [states.map((s) => s.stateVersion), 'int'],
    [states.map((s) => s.lastMsgId), 'bigint'],
    [states.map((s) => s.srcDttm), 'timestamptz'],
    [states.map((s) => s.createdAt), 'timestamptz'],
    [states.map((s) => s.updatedAt), 'timestamptz'],
  ];
  const ctes = [
    `main AS (INSERT INTO flight_schd (${mainCols.join(', ')})
      SELECT * FROM unnest(${mainArrays.map(([a, t]) => `${p(a)}::${t}[]`).join(', ')})
      ON CONFLICT (flid) DO UPDATE SET ${mainCols
        .slice(1)
        .map((c) => `${c} = EXCLUDED.${c}`)
        .join(', ')}
      RETURNING flid, ${rowVersion('flight_schd')} AS version)`,
  ];

  for (const kind of RESOURCE_KINDS) {
    const touched = writes.filter((w) => w.kinds.includes(kind)).map((w) => w.state);
    if (touched.length === 0) continue;
    const t = DETAIL_TABLES[kind];
    const rows = touched.flatMap((s) => s.resources[kind].map((item, ord) => ({ flid: s.flid, item, ord })));
    const flidsP = p(touched.map((s) => s.flid));
    const rowFlidP = p(rows.map((r) => r.flid));
    const cols = t.columns.map((c) => [c, p(rows.map((r) => c.value(r.item, tz)))] as const);
    const ordP = p(rows.map((r) => r.ord));
    const itemP = p(rows.map((r) => JSON.stringify(r.item.nodes)));
    // A shared table's collection column is a constant of the insert and part of the conflict key.
    const coll = t.collection ? [t.collection.column] : [];
    const collValue = t.collection ? [`${p(t.collection.value)}::text`] : [];
    const names = ['flid', ...cols.map(([c]) => c.column), 'ord', 'item'];
    const keyCols = t.keys;
    const n = ctes.length;
    ctes.push(
      `u${n} AS (INSERT INTO ${t.table} (${[...names, ...coll].join(', ')})
        SELECT *${collValue.map((v) => `, ${v}`).join('')} FROM unnest(${rowFlidP}::text[], ${cols.map(([c, ph]) => `${ph}::${c.type}[]`).join(', ')}, ${ordP}::int[], ${itemP}::jsonb[])
        ON CONFLICT (flid, ${[...coll, ...keyCols].join(', ')}) DO UPDATE SET ${names
          .filter((c) => c !== 'flid' && !keyCols.includes(c))
          .map((c) => `${c} = EXCLUDED.${c}`)
          .join(', ')})`,
      `d${n} AS (DELETE FROM ${t.table} d WHERE d.flid = ANY(${flidsP}::text[])${collectionFilter(t, 'd')}
        AND (d.flid, ${keyCols.map((k) => `d.${k}`).join(', ')}) NOT IN
            (SELECT * FROM unnest(${rowFlidP}::text[], ${keyCols.map((k) => `${cols.find(([c]) => c.column === k)![1]}::text[]`).join(', ')})))`,
    );
  }
  // One shape per set of changed kinds: a bounded number of texts, each prepared once.
  const written = await q.query<{ flid: string; version: string }>(
    prepared(`WITH ${ctes.join(',\n')} SELECT flid, version FROM main`),
    params,
  );
  if (cache) {
    const byFlid = new Map(states.map((s) => [s.flid, s]));
    for (const { flid, version } of written.rows) cache.set(flid, version, byFlid.get(flid)!);
  }
}

/** Removes flights and all their details (history sweep), in one statement. */
export async function deleteFlights(q: Queryable, flids: string[]): Promise<void> {
  if (flids.length === 0) return;
  // ROUT and ERUT share a table: delete from each table once.
  const tables = [...new Set(RESOURCE_KINDS.map((k) => DETAIL_TABLES[k].table))];
  const ctes = tables.map((t, i) => `d${i} AS (DELETE FROM ${t} WHERE flid = ANY($1::text[]))`);
  await q.query(`WITH ${ctes.join(', ')} DELETE FROM flight_schd WHERE flid = ANY($1::text[])`, [flids]);
}
