import type { Config } from '../config/config.ts';
import type { Clock } from '../shared/clock.ts';
import { round, type TargetReport } from './report.ts';
import type { DeliverySettings } from './settings.ts';
import type { ClaimedRow, DispatchContext, OutRecord, Publisher, PublishResult } from './types.ts';
import { HEADER_EVENT_ID, HEADER_EVENT_TYPE } from './types.ts';

/* Handing a claimed run to the publishers: outside any transaction (the lease protects the rows),
 * every publisher at once, each under the publish deadline that the lease outlasts. */

/** The Kafka topic of a target: 'msg' and 'schd' from config, 'tx:<topic>' names its own. */
export function topicForTarget(config: Pick<Config, 'outbox' | 'shadow'>, target: string): string | null {
  if (target === 'msg') return config.outbox.topicMsg;
  if (target === 'schd') return config.outbox.topicSchd;
  if (target.startsWith('tx:') && target.length > 3) return target.slice(3) + (config.shadow ? '.shadow' : '');
  return null;
}

/** Publishes a claimed run to every publisher (schd: only the newest version of each FLID). */
export async function publishRun(
  ctx: DispatchContext,
  pubs: Publisher[],
  target: string,
  settings: DeliverySettings,
  claimed: ClaimedRow[],
  report: TargetReport,
): Promise<{ rows: ClaimedRow[]; results: PublishResult[][] }> {
  // Outside any transaction, every publisher at once, each under the deadline.
  const topic = topicForTarget(ctx.config, target);
  const sendRows = target === 'schd' ? claimed.filter((r) => r.event_id === r.newest_id) : claimed;
  const records = sendRows.map((r) => toRecord(r, target, topic ?? ''));
  report.published += records.length;
  const results = await publishAll(ctx, pubs, sendRows, records, settings, topic, report);
  return { rows: sendRows, results };
}

/** Per publisher, one result per record; a record a publisher already took is not sent to it again. */
async function publishAll(
  ctx: DispatchContext,
  pubs: Publisher[],
  rows: ClaimedRow[],
  records: OutRecord[],
  settings: DeliverySettings,
  topic: string | null,
  report: TargetReport,
): Promise<PublishResult[][]> {
  if (topic === null) {
    const error = `unknown target ${records[0]?.target}: expected msg, schd or tx:<topic>`;
    return pubs.map(() => records.map(() => ({ ok: false as const, error })));
  }
  return Promise.all(
    pubs.map(async (p) => {
      // Publishers that already took an event (an earlier attempt of a fan-out) are skipped.
      const idx: number[] = [];
      for (let i = 0; i < rows.length; i++) if (!rows[i]!.delivered_to?.includes(p.name)) idx.push(i);
      const out: PublishResult[] = records.map(() => ({ ok: true as const, already: true }) as PublishResult);
      if (idx.length === 0) return out;
      const t = performance.now();
      let got = await withDeadline(ctx.clock, settings.publishTimeoutMs, (signal) =>
        p.publish(
          idx.map((i) => records[i]!),
          signal,
        ),
      ).catch((err: unknown): PublishResult[] => {
        // The publish deadline passed and the publisher did not say what it managed before it.
        const error = err instanceof Error ? err.message : String(err);
        return idx.map(() => ({ ok: false as const, error, timedOut: true }));
      });
      got = await settleTimeouts(p, got, settings.publishTimeoutMs);
      report.publishMs[p.name] = round((report.publishMs[p.name] ?? 0) + performance.now() - t);
      for (let k = 0; k < idx.length; k++) {
        out[idx[k]!] = got[k] ?? { ok: false, error: `${p.name} returned ${got.length} results for ${idx.length} records` };
      }
      return out;
    }),
  );
}

/** How long a probe may take; short, since it only asks "are you there". */
const PROBE_MS = 2000;
/** After the deadline aborts a publish, how long the publisher has to report what it did send. */
const GRACE_MS = 250;

/**
 * A timeout alone does not say whose fault it is. If the destination answers a probe, it is up
 * and this event is what hangs it: the timeout spends an attempt, so a poison event ends DEAD and
 * its target moves on. If the probe fails too, the destination is away: an outage, no attempt.
 */
async function settleTimeouts(p: Publisher, results: PublishResult[], publishTimeoutMs: number): Promise<PublishResult[]> {
  if (!results.some((r) => !r.ok && r.timedOut)) return results;
  let answers = false;
  let why = 'no probe';
  if (p.probe) {
    try {
      await p.probe(AbortSignal.timeout(Math.min(PROBE_MS, publishTimeoutMs)));
      answers = true;
    } catch (err) {
      why = err instanceof Error ? err.message : String(err);
    }
  }
  return results.map((r) => {
    if (r.ok || !r.timedOut) return r;
    return answers
      ? { ok: false as const, error: `${r.error} (the destination answers otherwise: this event's failure)` }
      : { ok: false as const, error: `${r.error} (destination unreachable: ${why})`, unavailable: true };
  });
}

/**
 * Runs `fn` with a signal that aborts after `ms` of the clock; stops waiting at the deadline, after
 * a short grace in which the publisher may still report per record what it did before it.
 */
// The reason the deadline's timer is stopped with once a publish settles: abort() without one
// builds a DOMException with its stack for every publish (~1 % of the relay's CPU in a profile).
const PUBLISH_DONE = Symbol('publish settled');

async function withDeadline<T>(clock: Clock, ms: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  const stopTimer = new AbortController();
  const timer = clock.sleep(ms, stopTimer.signal).then(() => {
    if (!stopTimer.signal.aborted) ac.abort(new Error(`publish timeout after ${ms}ms`));
  });
  let grace: ReturnType<typeof setTimeout> | undefined;
  try {
    return await new Promise<T>((resolve, reject) => {
      ac.signal.addEventListener('abort', () => (grace = setTimeout(() => reject(ac.signal.reason), GRACE_MS)), { once: true });
      fn(ac.signal).then(resolve, reject);
    });
  } finally {
    stopTimer.abort(PUBLISH_DONE);
    clearTimeout(grace);
    void timer;
  }
}

function toRecord(r: ClaimedRow, target: string, topic: string): OutRecord {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(r.headers ?? {})) headers[k] = typeof v === 'string' ? v : JSON.stringify(v);
  headers[HEADER_EVENT_ID] = String(r.event_id);
  headers[HEADER_EVENT_TYPE] = r.event_type;
  return { eventId: r.event_id, target, topic, key: r.partition_key, value: r.value, type: r.event_type, headers };
}
