/**
 * Hot statements that PostgreSQL parses once per connection instead of on every call: `pg` sends
 * them as named prepared statements, and after a few runs the server may reuse a generic plan, so
 * it stops planning them too. PGlite runs them as any other statement.
 *
 * Only for statements whose result columns are spelled out (no `SELECT *`, no `RETURNING *`): a
 * prepared statement whose result type changes under it (a migration adding a column) fails with
 * "cached plan must not change result type" — lib/db/pg.ts then drops that connection.
 */
const names = new Map<string, string>();

// Texts are fixed in the code or built from a bounded set of shapes (writeFlights: one per set of
// changed resource kinds, a dozen or so in practice). The bound keeps a workload that changes every
// combination from keeping hundreds of plans in every server session; beyond it texts run unnamed.
const MAX_NAMED = 100;

/** Marks `text` as a hot statement and returns it unchanged. */
export function prepared(text: string): string {
  if (!names.has(text) && names.size < MAX_NAMED) names.set(text, `msgx_${names.size + 1}`);
  return text;
}

/** The `pg` query config for `text`: named when it was marked. */
export function queryConfig(text: string, values: unknown[]): { text: string; values: unknown[]; name?: string } {
  const name = names.get(text);
  return name ? { name, text, values } : { text, values };
}

/** PostgreSQL's refusal to run a prepared statement whose result type changed (SQLSTATE 0A000). */
export const isStalePlan = (err: unknown): boolean =>
  (err as { code?: string })?.code === '0A000' && /cached plan must not change result type/.test(String((err as Error)?.message));
