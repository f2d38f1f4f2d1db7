import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * docs/schema.sql is the schema the numbered migrations build, in one file: the map a reader
 * opens instead of replaying migrations/ in their head (graphile-worker keeps one the same way).
 * It must be what the migrations make today; after a new migration, refresh it with
 * `MSGX_UPDATE_SCHEMA=1 npx vitest run test/integration/schema-snapshot.test.ts`.
 */
const SNAPSHOT = join(import.meta.dirname, '..', '..', 'docs', 'schema.sql');

/** pg_dump's schema without what changes from run to run or host to host. */
function dumpSchema(url: string): string {
  const raw = execFileSync('pg_dump', ['--schema-only', '--no-owner', '--no-privileges', url], {
    encoding: 'utf8',
  });
  const kept = raw.split('\n').filter((line) => !/^(\\(un)?restrict |SET |SELECT pg_catalog\.set_config|-- Dumped (from|by) )/.test(line));
  return `${kept
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`;
}

describe('the current schema (docs/schema.sql)', () => {
  let pg: TestPg;
  beforeAll(async () => {
    pg = await freshPg();
  });
  afterAll(async () => {
    await pg?.drop();
  });

  it('is what the migrations build on an empty database', () => {
    const actual = dumpSchema(pg.url);
    if (process.env.MSGX_UPDATE_SCHEMA === '1') writeFileSync(SNAPSHOT, actual);
    expect(actual.length).toBeGreaterThan(1000);
    expect(actual, 'docs/schema.sql is stale: refresh it (see this file)').toBe(readFileSync(SNAPSHOT, 'utf8'));
  });

  it('documents every SQL function msgx defines (COMMENT ON FUNCTION)', async () => {
    const r = await pg.db.query<{ fn: string; doc: string | null }>(
      `SELECT p.oid::regprocedure::text AS fn, obj_description(p.oid, 'pg_proc') AS doc
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1`,
    );
    expect(r.rows.length).toBeGreaterThan(0);
    expect(r.rows.filter((x) => !x.doc).map((x) => x.fn)).toEqual([]);
  });
});
