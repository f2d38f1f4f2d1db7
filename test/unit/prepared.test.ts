import { describe, expect, it } from 'vitest';
import { isStalePlan, prepared, queryConfig } from '../../lib/db/prepared.ts';

describe('prepared statements (lib/db/prepared.ts)', () => {
  it('names a marked text once, leaves other texts unnamed, and stops naming at 100 texts', () => {
    const hot = prepared('SELECT a FROM t WHERE id = $1');
    expect(hot).toBe('SELECT a FROM t WHERE id = $1');
    const first = queryConfig(hot, [1]);
    expect(first).toEqual({ name: expect.stringMatching(/^msgx_\d+$/), text: hot, values: [1] });
    expect(queryConfig(prepared(hot), [2]).name).toBe(first.name);
    expect(queryConfig('SELECT b FROM t', [])).toEqual({ text: 'SELECT b FROM t', values: [] });
    const shapes = Array.from({ length: 150 }, (_, i) => prepared(`SELECT ${i} AS n`));
    const named = shapes.filter((s) => queryConfig(s, []).name !== undefined);
    expect(named.length).toBe(100 - 1); // the first text above took one of the hundred
    expect(new Set(named.map((s) => queryConfig(s, []).name)).size).toBe(named.length);
  });

  it('knows PostgreSQL’s refusal of a stale plan from other errors', () => {
    expect(isStalePlan(Object.assign(new Error('cached plan must not change result type'), { code: '0A000' }))).toBe(true);
    expect(isStalePlan(Object.assign(new Error('cached plan must not change result type'), { code: 'XX000' }))).toBe(false);
    expect(isStalePlan(Object.assign(new Error('FOR UPDATE is not allowed with GROUP BY clause'), { code: '0A000' }))).toBe(false);
    expect(isStalePlan(null)).toBe(false);
  });
});
