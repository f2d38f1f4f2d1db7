import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db, QueryResult } from '../../lib/db/db.ts';
import { PgDb } from '../../lib/db/pg.ts';
import { PgliteDb } from '../../lib/db/pglite.ts';
import { prepared } from '../../lib/db/prepared.ts';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';

/**
 * One database contract, two engines: every statement kind msgx uses goes through PgDb on real
 * PostgreSQL and through PgliteDb, and both must answer what PostgreSQL's own command tags say.
 * Each case states the expected answer (the oracle), and the two engines are also compared
 * field by field, so a difference the cases did not foresee still shows.
 */
type Outcome = { rows: unknown[]; rowCount: number } | { error: Record<string, unknown> };

interface Case {
  name: string;
  sql: string;
  params?: unknown[];
  /** What PostgreSQL answers; `rows` omitted when only the count matters. */
  expect: { rowCount: number; rows?: unknown[] } | { error: Record<string, unknown> };
}

const at = new Date('2026-11-30T08:00:00.000Z');

const CASES: Case[] = [
  {
    name: 'CREATE TABLE',
    sql: 'CREATE TABLE c_items (id bigserial PRIMARY KEY, k text NOT NULL UNIQUE, n int CHECK (n >= 0), at timestamptz, doc jsonb, tags text[], price numeric(8,2), ok boolean)',
    expect: { rowCount: 0, rows: [] },
  },
  { name: 'CREATE INDEX', sql: 'CREATE INDEX c_items_n ON c_items (n)', expect: { rowCount: 0, rows: [] } },
  {
    name: 'CREATE TABLE IF NOT EXISTS of an existing table',
    sql: 'CREATE TABLE IF NOT EXISTS c_items (id int)',
    expect: { rowCount: 0, rows: [] },
  },
  {
    name: 'INSERT of two rows',
    sql: 'INSERT INTO c_items (k, n) VALUES ($1, $2), ($3, $4)',
    params: ['a', 1, 'b', 2],
    expect: { rowCount: 2, rows: [] },
  },
  {
    name: 'INSERT … RETURNING with every type msgx stores',
    sql: 'INSERT INTO c_items (k, n, at, doc, tags, price, ok) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, k, n, at, doc, tags, price, ok',
    params: ['c', 3, at, JSON.stringify({ a: [1, 'x'] }), ['p', 'q'], '12.50', true],
    expect: { rowCount: 1, rows: [{ id: 3, k: 'c', n: 3, at, doc: { a: [1, 'x'] }, tags: ['p', 'q'], price: '12.50', ok: true }] },
  },
  {
    name: 'INSERT … ON CONFLICT DO NOTHING that inserts nothing',
    sql: 'INSERT INTO c_items (k) VALUES ($1) ON CONFLICT (k) DO NOTHING',
    params: ['a'],
    expect: { rowCount: 0, rows: [] },
  },
  {
    name: 'INSERT … SELECT of no rows',
    sql: 'INSERT INTO c_items (k) SELECT $1::text WHERE false',
    params: ['z'],
    expect: { rowCount: 0, rows: [] },
  },
  {
    name: 'SELECT of three rows',
    sql: 'SELECT k FROM c_items ORDER BY id',
    expect: { rowCount: 3, rows: [{ k: 'a' }, { k: 'b' }, { k: 'c' }] },
  },
  {
    name: 'SELECT with parameters',
    sql: 'SELECT k, n FROM c_items WHERE n >= $1 ORDER BY k',
    params: [2],
    expect: {
      rowCount: 2,
      rows: [
        { k: 'b', n: 2 },
        { k: 'c', n: 3 },
      ],
    },
  },
  { name: 'SELECT of no rows', sql: 'SELECT 1 FROM c_items WHERE id = $1', params: [999], expect: { rowCount: 0, rows: [] } },
  {
    name: 'SELECT = ANY of an array parameter',
    sql: 'SELECT id FROM c_items WHERE id = ANY($1::bigint[]) ORDER BY id',
    params: [[1, 3, 7]],
    expect: { rowCount: 2, rows: [{ id: 1 }, { id: 3 }] },
  },
  { name: 'SELECT count(*) (bigint as a number)', sql: 'SELECT count(*) AS n FROM c_items', expect: { rowCount: 1, rows: [{ n: 3 }] } },
  {
    name: 'SELECT of NULLs',
    sql: 'SELECT at, doc FROM c_items WHERE k = $1',
    params: ['a'],
    expect: { rowCount: 1, rows: [{ at: null, doc: null }] },
  },
  {
    name: 'SELECT of a function (advisory lock)',
    sql: 'SELECT pg_try_advisory_lock(hashtext($1)) AS got',
    params: ['contract'],
    expect: { rowCount: 1, rows: [{ got: true }] },
  },
  {
    name: 'SELECT pg_advisory_unlock',
    sql: 'SELECT pg_advisory_unlock(hashtext($1)) AS released',
    params: ['contract'],
    expect: { rowCount: 1, rows: [{ released: true }] },
  },
  { name: 'UPDATE of two rows', sql: 'UPDATE c_items SET n = n + 10 WHERE n < $1', params: [3], expect: { rowCount: 2, rows: [] } },
  { name: 'UPDATE of no rows', sql: 'UPDATE c_items SET n = 0 WHERE k = $1', params: ['nope'], expect: { rowCount: 0, rows: [] } },
  {
    name: 'UPDATE … RETURNING',
    sql: 'UPDATE c_items SET n = n + 1 WHERE k = $1 RETURNING k, n',
    params: ['c'],
    expect: { rowCount: 1, rows: [{ k: 'c', n: 4 }] },
  },
  {
    name: 'UPDATE … FROM unnest of array parameters',
    sql: 'UPDATE c_items c SET n = v.n FROM unnest($1::text[], $2::int[]) AS v(k, n) WHERE c.k = v.k',
    params: [
      ['a', 'b', 'x'],
      [5, 6, 7],
    ],
    expect: { rowCount: 2, rows: [] },
  },
  {
    name: 'data-modifying CTE read by a SELECT',
    sql: 'WITH u AS (UPDATE c_items SET ok = false WHERE ok IS NULL RETURNING id) SELECT count(*) AS n FROM u',
    expect: { rowCount: 1, rows: [{ n: 2 }] },
  },
  { name: 'DELETE of one row', sql: 'DELETE FROM c_items WHERE k = $1', params: ['b'], expect: { rowCount: 1, rows: [] } },
  {
    name: 'DELETE … RETURNING of no rows',
    sql: 'DELETE FROM c_items WHERE k = $1 RETURNING id',
    params: ['b'],
    expect: { rowCount: 0, rows: [] },
  },
  {
    name: 'a script of several statements answers with its last',
    sql: `CREATE TABLE c_script (a int); INSERT INTO c_script VALUES (1), (2); UPDATE c_script SET a = a + 1;`,
    expect: { rowCount: 2, rows: [] },
  },
  {
    name: 'a script ending in a SELECT',
    sql: `INSERT INTO c_script VALUES (9); SELECT a FROM c_script ORDER BY a;`,
    expect: { rowCount: 3, rows: [{ a: 2 }, { a: 3 }, { a: 9 }] },
  },
  { name: 'a statement with a semicolon in a literal', sql: `SELECT ';' AS s`, expect: { rowCount: 1, rows: [{ s: ';' }] } },
  { name: 'pg_notify', sql: 'SELECT pg_notify($1, $2)', params: ['c_chan', 'hello'], expect: { rowCount: 1, rows: [{ pg_notify: '' }] } },
  { name: 'DROP TABLE', sql: 'DROP TABLE c_script', expect: { rowCount: 0, rows: [] } },
  {
    name: 'unique violation (23505)',
    sql: 'INSERT INTO c_items (k) VALUES ($1)',
    params: ['a'],
    expect: {
      error: { code: '23505', constraint: 'c_items_k_key', table: 'c_items', detail: 'Key (k)=(a) already exists.', severity: 'ERROR' },
    },
  },
  {
    name: 'not-null violation (23502)',
    sql: 'INSERT INTO c_items (k) VALUES (NULL)',
    expect: { error: { code: '23502', column: 'k', table: 'c_items' } },
  },
  {
    name: 'check violation (23514)',
    sql: 'UPDATE c_items SET n = -1 WHERE k = $1',
    params: ['a'],
    expect: { error: { code: '23514', constraint: 'c_items_n_check' } },
  },
  {
    name: 'undefined table (42P01)',
    sql: 'SELECT * FROM c_nowhere',
    expect: { error: { code: '42P01', message: 'relation "c_nowhere" does not exist' } },
  },
  {
    name: 'duplicate table (42P07)',
    sql: 'CREATE TABLE c_items (id int)',
    expect: { error: { code: '42P07', message: 'relation "c_items" already exists' } },
  },
  { name: 'syntax error (42601)', sql: 'SELEC 1', expect: { error: { code: '42601' } } },
  { name: 'invalid text for a type (22P02)', sql: 'SELECT $1::int AS n', params: ['x'], expect: { error: { code: '22P02' } } },
  { name: 'NUL in text (22021)', sql: 'SELECT $1::text AS t', params: ['a\u0000b'], expect: { error: { code: '22021' } } },
  { name: 'an error inside a script (42P01)', sql: 'SELECT 1; SELECT * FROM c_nowhere;', expect: { error: { code: '42P01' } } },
];

/** The fields of pg's DatabaseError that callers may branch on or show. */
const ERROR_FIELDS = ['code', 'message', 'severity', 'detail', 'constraint', 'table', 'column', 'schema'] as const;

async function outcome(run: () => Promise<QueryResult<unknown>>): Promise<Outcome> {
  try {
    const r = await run();
    return { rows: r.rows, rowCount: r.rowCount };
  } catch (err) {
    const e = err as Record<string, unknown>;
    return { error: Object.fromEntries(ERROR_FIELDS.map((f) => [f, e[f]])) };
  }
}

function expectMatches(got: Outcome, want: Case['expect'], engine: string, name: string): void {
  if ('error' in want) {
    expect(got, `${engine}: ${name}`).toHaveProperty('error');
    expect((got as { error: Record<string, unknown> }).error, `${engine}: ${name}`).toMatchObject(want.error);
  } else {
    expect(got, `${engine}: ${name}`).not.toHaveProperty('error');
    expect((got as { rowCount: number }).rowCount, `${engine}: ${name} rowCount`).toBe(want.rowCount);
    if (want.rows) expect((got as { rows: unknown[] }).rows, `${engine}: ${name} rows`).toEqual(want.rows);
  }
}

describe('the database contract: PgDb (PostgreSQL) and PgliteDb answer alike', () => {
  let pg: TestPg;
  let lite: Db;
  beforeAll(async () => {
    pg = await freshPg({ migrate: false });
    lite = await PgliteDb.open();
  });
  afterAll(async () => {
    await lite?.close();
    await pg?.drop();
  });

  it('every statement kind: rows, rowCount and SQLSTATE errors', async () => {
    for (const c of CASES) {
      const a = await outcome(() => pg.db.query(c.sql, c.params));
      const b = await outcome(() => lite.query(c.sql, c.params));
      expectMatches(a, c.expect, 'pg', c.name);
      expectMatches(b, c.expect, 'pglite', c.name);
      expect(b, `pglite equals pg: ${c.name}`).toEqual(a);
    }
  });

  it('the same statements inside a transaction, and the transaction commits', async () => {
    for (const db of [pg.db, lite]) {
      await db.query('CREATE TABLE c_tx (id int PRIMARY KEY, v text)');
      const seen = await db.tx(async (tx) => [
        await tx.query('INSERT INTO c_tx VALUES (1, $1), (2, $2)', ['a', 'b']),
        await tx.query('SELECT * FROM c_tx WHERE id > $1 FOR UPDATE', [0]),
        await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['c_tx']),
        await tx.query('UPDATE c_tx SET v = $1 WHERE id = $2 RETURNING v', ['c', 2]),
        await tx.query('DELETE FROM c_tx WHERE id = $1', [1]),
        await tx.query('CREATE INDEX c_tx_v ON c_tx (v); INSERT INTO c_tx VALUES (3, NULL), (4, NULL);'),
      ]);
      expect(
        seen.map((r) => r.rowCount),
        db.kind,
      ).toEqual([2, 2, 1, 1, 1, 2]);
      expect(seen[3]!.rows, db.kind).toEqual([{ v: 'c' }]);
      const after = await db.query('SELECT id, v FROM c_tx ORDER BY id');
      expect(after, db.kind).toEqual({
        rowCount: 3,
        rows: [
          { id: 2, v: 'c' },
          { id: 3, v: null },
          { id: 4, v: null },
        ],
      });
    }
  });

  it('a transaction whose function throws rolls back, and the error reaches the caller with its code', async () => {
    const errors: Outcome[] = [];
    for (const db of [pg.db, lite]) {
      const e = await outcome(() =>
        db.tx(async (tx) => {
          await tx.query('INSERT INTO c_tx VALUES (10, $1)', ['x']);
          return tx.query('INSERT INTO c_tx VALUES (2, $1)', ['dup']);
        }),
      );
      expect(e, db.kind).toMatchObject({ error: { code: '23505', constraint: 'c_tx_pkey' } });
      errors.push(e);
      const thrown = await db
        .tx(async (tx) => {
          await tx.query('INSERT INTO c_tx VALUES (11, $1)', ['y']);
          throw new Error('changed my mind');
        })
        .catch((err: Error) => err.message);
      expect(thrown).toBe('changed my mind');
      const left = await db.query('SELECT id FROM c_tx WHERE id >= $1', [10]);
      expect(left, db.kind).toEqual({ rowCount: 0, rows: [] });
    }
    expect(errors[1]).toEqual(errors[0]);
  });

  it('LISTEN/NOTIFY: a notification committed by a transaction reaches the listener once', async () => {
    for (const db of [pg.db, lite]) {
      const got: string[] = [];
      const stop = await db.listen('c_wake', (p) => got.push(p));
      await db.tx(async (tx) => {
        await tx.query(`SELECT pg_notify('c_wake', $1)`, ['one']);
      });
      await waitFor(() => got.length === 1, { what: `${db.kind} notification` });
      expect(got).toEqual(['one']);
      await stop();
    }
  });

  it('a local wake reaches this process at once and its NOTIFY is not delivered here again; other NOTIFYs still are', async () => {
    const got: string[] = [];
    const stop = await pg.db.listen('c_local', (p) => got.push(p));
    const wake = pg.db.localWake('c_local');
    wake.now();
    // Delivered before any round trip to the server.
    expect(got).toEqual([wake.payload]);
    await pg.db.query(`SELECT pg_notify('c_local', $1)`, [wake.payload]);
    await pg.db.query(`SELECT pg_notify('c_local', $1)`, ['from another process']);
    await waitFor(() => got.length === 2, { what: 'the other notification' });
    // A second copy of the first payload from elsewhere would be a new wake: only one is skipped.
    await pg.db.query(`SELECT pg_notify('c_local', $1)`, [wake.payload]);
    await waitFor(() => got.length === 3, { what: 'the repeated payload' });
    expect(got).toEqual([wake.payload, 'from another process', wake.payload]);
    await stop();
  });

  it('a prepared statement answers like any other; after a migration changes its result type, one call fails and the next ones work', async () => {
    const one = new PgDb(pg.url, { max: 1 });
    try {
      for (const db of [one, lite] as Db[]) {
        await db.query('CREATE TABLE c_prep (id int PRIMARY KEY)');
        await db.query('INSERT INTO c_prep VALUES (1), (2)');
        // Deliberately `SELECT *`, the shape lib/db/prepared.ts tells callers to avoid.
        const sql = prepared('SELECT * FROM c_prep WHERE id >= $1 ORDER BY id');
        // Past the server's first five custom plans, so its generic plan answers too.
        for (let i = 0; i < 7; i++) {
          expect((await db.query(sql, [1])).rows, db.kind).toEqual([{ id: 1 }, { id: 2 }]);
          expect(await db.tx((tx) => tx.query(sql, [2])), db.kind).toEqual({ rowCount: 1, rows: [{ id: 2 }] });
        }
        if (db === one) {
          const named = await one.query(`SELECT generic_plans > 0 AS generic FROM pg_prepared_statements WHERE statement = $1`, [sql]);
          expect(named.rows).toEqual([{ generic: true }]);
        }
        const after = async (run: () => Promise<{ rows: unknown[] }>) => {
          const seen: unknown[] = [];
          for (let i = 0; i < 3; i++)
            seen.push(
              await run().then(
                (r) => r.rows,
                (e: Error) => e.message,
              ),
            );
          return seen;
        };
        await db.query(`ALTER TABLE c_prep ADD COLUMN v text DEFAULT 'x'`);
        const inTx = await after(() => db.tx((tx) => tx.query(sql, [2])));
        await db.query(`ALTER TABLE c_prep ADD COLUMN w int DEFAULT 7`);
        const alone = await after(() => db.query(sql, [2]));
        const v = [{ id: 2, v: 'x' }];
        const w = [{ id: 2, v: 'x', w: 7 }];
        if (db === one) {
          // PostgreSQL refuses the stale plan once; the connection is replaced and prepares it anew.
          expect(inTx).toEqual([expect.stringMatching(/cached plan must not change result type/), v, v]);
          expect(alone).toEqual([expect.stringMatching(/cached plan must not change result type/), w, w]);
        } else {
          expect(inTx).toEqual([v, v, v]);
          expect(alone).toEqual([w, w, w]);
        }
      }
    } finally {
      await one.close();
    }
  });
});
