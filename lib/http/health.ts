import { existsSync } from 'node:fs';
import { migrationsDir, readMigrations } from '../db/migrate.ts';
import { isPaused } from '../pipeline/pause.ts';
import type { AppContext } from '../app/context.ts';
import type { Route } from './types.ts';

/** A dependency that has not answered in this long is failing, as far as a load balancer can wait. */
const CHECK_TIMEOUT_MS = 3000;

export type HealthCheck = () => Promise<void>;

/**
 * `GET /health`: 200 once migrations ran and every configured dependency answers; 503 naming the
 * failing check otherwise. Extra checks (Kafka) are registered by whoever owns the dependency.
 * `pipeline` says whether head processing is paused: information, not a failing check — a pause
 * is an operator's decision, and a health check that failed on it would have the twin's container
 * restarted or the ingress taken out of service.
 */
export function healthRoute(extra: Record<string, HealthCheck> = {}): Route {
  return {
    method: 'GET',
    path: '/health',
    async handle(_req, ctx) {
      const checks: Record<string, string> = {};
      const run = async (name: string, fn: HealthCheck) => {
        try {
          await withTimeout(fn(), CHECK_TIMEOUT_MS, name);
          checks[name] = 'ok';
        } catch (err) {
          checks[name] = `failing: ${err instanceof Error ? err.message : String(err)}`;
        }
      };
      await Promise.all([
        run('database', () => ctx.db.query('SELECT 1').then(() => undefined)),
        run('migrations', () => migrationsApplied(ctx)),
        run('mailbox', () => ctx.mailbox.ping()),
        ...Object.entries(extra).map(([name, fn]) => run(name, fn)),
      ]);
      const ok = Object.values(checks).every((v) => v === 'ok');
      const paused = checks.migrations === 'ok' ? await isPaused(ctx.db).catch(() => undefined) : undefined;
      const pipeline = paused === undefined ? {} : { pipeline: paused ? 'paused' : 'running' };
      return { status: ok ? 200 : 503, body: { status: ok ? 'ok' : 'failing', checks, ...pipeline } };
    },
  };
}

/**
 * Every migration this code knows was applied. A deployed ingress ships no migrations (only the
 * migrate function does, and the ingress goes live after it ran): there, at least one applied.
 */
async function migrationsApplied(ctx: AppContext): Promise<void> {
  const expected = shipsMigrations() ? readMigrations().length : 1;
  const r = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM msgx_migrations`);
  const n = r.rows[0]?.n ?? 0;
  if (n < expected) throw new Error(`${n} of ${expected} migrations applied`);
}

function shipsMigrations(): boolean {
  try {
    return existsSync(migrationsDir());
  } catch {
    return false;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e) => (clearTimeout(t), reject(e)),
    );
  });
}
