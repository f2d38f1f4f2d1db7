import pg from 'pg';
import { sleep } from './stats.ts';

/**
 * What limits a figure: samples what the database's active sessions wait on (pg_stat_activity
 * every 50 ms: 'CPU' = running, 'IO:WALSync' = commit flush, 'Client:ClientRead' = waiting for
 * the client's next statement, i.e. a round trip) and this process's CPU use over the interval.
 */
export async function observe(url: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const waits: Record<string, number> = {};
  let on = true;
  const loop = (async () => {
    while (on) {
      const r = await c
        .query<{ w: string; n: number }>(
          `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS w, count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
             AND state IN ('active', 'idle in transaction') GROUP BY 1`,
        )
        .catch(() => ({ rows: [] as { w: string; n: number }[] }));
      for (const row of r.rows) waits[row.w] = (waits[row.w] ?? 0) + row.n;
      await sleep(50);
    }
  })();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  return {
    async stop(): Promise<{ cpuPct: number; waits: Record<string, number> }> {
      const u = process.cpuUsage(cpu0);
      const wall = performance.now() - t0;
      on = false;
      await loop;
      await c.end();
      return { cpuPct: Math.round(((u.user + u.system) / 1000 / wall) * 100), waits };
    },
  };
}

/** "IO:WALSync 40%, CPU 30%, …" */
export function topWaits(w: Record<string, number>, n = 4): string {
  const total = Object.values(w).reduce((a, b) => a + b, 0) || 1;
  return Object.entries(w)
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${Math.round((v / total) * 100)}%`)
    .join(', ');
}
