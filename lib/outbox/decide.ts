import type { ClaimedRow } from './claim.ts';
import { backoffMs, type DeliverySettings } from './settings.ts';
import type { Publisher, PublishResult } from './types.ts';

/* Pure: from what the publishers answered to each claimed row's next state. No I/O here, so the
 * retry, dead and no-overtaking rules can be read apart from the database. Two algorithms, one per
 * kind of target: `decideRun` for an ordinary target (a run in event_id order, nothing overtakes a
 * failed event) and `decideSchdFlush` for the aggregated msgx.schd flush (one record stands for
 * every open version of its FLID). */

export interface RowUpdate {
  id: number;
  status: 'SENT' | 'PENDING' | 'DEAD';
  attempts: number;
  nextAt: Date | null;
  error: string | null;
  sentAs: number | null;
  /** Failed only because the destination was away: no attempt spent, the target shows as stalled. */
  stalled?: boolean;
}

export interface Outcome {
  id: number;
  publisher: string;
  ok: boolean;
  partition: number | null;
  offset: number | null;
  error: string | null;
}

export interface Decision {
  updates: RowUpdate[];
  outcomes: Outcome[];
}

/** What one batch's publish produced: the rows handed to the publishers and each one's answers. */
export interface DecideInput {
  pubs: Publisher[];
  settings: DeliverySettings;
  /** The time the outcome is recorded at; backoffs count from it. */
  now: Date;
  /** The rows that were published, in order. */
  sent: ClaimedRow[];
  /** Per publisher (same order as `pubs`), one result per row of `sent`. */
  results: PublishResult[][];
}

/**
 * An ordinary target: every row taken by every publisher is SENT; the first one that is not is
 * charged (or held as stalled, for an outage) and the rest of the run goes back to PENDING behind
 * it, uncharged — nothing overtakes it.
 */
export function decideRun({ pubs, settings, now, sent, results }: DecideInput): Decision {
  const updates: RowUpdate[] = [];
  const outcomes: Outcome[] = [];
  let blocked = false;
  for (let i = 0; i < sent.length; i++) {
    const row = sent[i]!;
    const per = results.map((rs) => rs[i]!);
    collectOutcomes(outcomes, row, pubs, per, blocked);
    if (blocked) {
      updates.push(unchanged(row));
      continue;
    }
    const failures = failuresOf(pubs, per);
    if (failures.length === 0) {
      updates.push(sentNow(row, null));
    } else {
      // The first event not taken by every publisher: it alone is charged; the rest of the
      // run goes back to PENDING behind it (no overtaking).
      updates.push(failedNow(settings, now, row, failures.join('; '), per));
      blocked = true;
    }
  }
  return { updates, outcomes };
}

/**
 * The msgx.schd flush: `sent` holds the newest version of each FLID group; `claimed` every row the
 * flush leased (each with `newest_id`, the row that represents its group). A group whose newest
 * version went out is SENT whole (the older versions with `sent_as`); one that failed backs off on
 * its newest version, and the older ones share its fate (PENDING again, or DEAD with it).
 * FLID groups are independent: a failed flight holds no other.
 */
export function decideSchdFlush({ claimed, ...input }: DecideInput & { claimed: ClaimedRow[] }): Decision {
  const { pubs, settings, now, sent, results } = input;
  const updates: RowUpdate[] = [];
  const outcomes: Outcome[] = [];
  const members = new Map<number, ClaimedRow[]>();
  for (const r of claimed) {
    const list = members.get(r.newest_id!) ?? [];
    list.push(r);
    members.set(r.newest_id!, list);
  }
  for (let i = 0; i < sent.length; i++) {
    const row = sent[i]!;
    const per = results.map((rs) => rs[i]!);
    collectOutcomes(outcomes, row, pubs, per, false);
    const failures = failuresOf(pubs, per);
    const others = (members.get(row.event_id) ?? []).filter((m) => m.event_id !== row.event_id);
    if (failures.length === 0) {
      updates.push(sentNow(row, null));
      for (const m of others) updates.push(sentNow(m, row.event_id));
      continue;
    }
    const onlyNotAttempted = per.every((p) => p.ok || p.notAttempted);
    const u = onlyNotAttempted ? unchanged(row) : failedNow(settings, now, row, failures.join('; '), per);
    updates.push(u);
    for (const m of others) {
      // The versions it stands for share its fate: merged again next flush, or dead with it.
      updates.push(
        u.status === 'DEAD'
          ? {
              id: m.event_id,
              status: 'DEAD',
              attempts: m.attempts,
              nextAt: null,
              error: `superseded by dead event ${row.event_id}`,
              sentAs: row.event_id,
            }
          : unchanged(m),
      );
    }
  }
  return { updates, outcomes };
}

const sentNow = (row: ClaimedRow, sentAs: number | null): RowUpdate => ({
  id: row.event_id,
  status: 'SENT',
  attempts: row.attempts,
  nextAt: null,
  error: null,
  sentAs,
});

/** Back to PENDING as it was: not tried, or held behind a failure; not charged. */
const unchanged = (row: ClaimedRow): RowUpdate => ({
  id: row.event_id,
  status: 'PENDING',
  attempts: row.attempts,
  nextAt: null,
  error: null,
  sentAs: null,
});

/**
 * A row a publisher did not take. Every failing publisher was unreachable: an outage, not this
 * event's fault. It keeps its attempts and is tried again after the initial backoff, so a broker
 * outage of any length kills no event and delivery resumes within that backoff of the broker's
 * return. Anything else (docs/outbox.md "Which failures spend an attempt") is charged to the event.
 */
function failedNow(settings: DeliverySettings, now: Date, row: ClaimedRow, error: string, per: PublishResult[]): RowUpdate {
  const nowMs = now.getTime();
  if (per.every((p) => p.ok || p.unavailable))
    return {
      id: row.event_id,
      status: 'PENDING',
      attempts: row.attempts,
      nextAt: new Date(nowMs + settings.initialBackoffMs),
      error,
      sentAs: null,
      stalled: true,
    };
  const attempts = row.attempts + 1;
  const dead = attempts >= settings.maxRetryCount;
  return {
    id: row.event_id,
    status: dead ? 'DEAD' : 'PENDING',
    attempts,
    nextAt: dead ? null : new Date(nowMs + backoffMs(settings, attempts)),
    error,
    sentAs: null,
  };
}

/** event_delivery rows to write: each publisher's answer, except skips and failures behind a blocked head. */
function collectOutcomes(out: Outcome[], row: ClaimedRow, pubs: Publisher[], per: PublishResult[], blocked: boolean) {
  for (let j = 0; j < pubs.length; j++) {
    const r = per[j]!;
    if ((r as { already?: boolean }).already) continue;
    if (r.ok) {
      out.push({
        id: row.event_id,
        publisher: pubs[j]!.name,
        ok: true,
        partition: r.partition ?? null,
        offset: r.offset ?? null,
        error: null,
      });
    } else if (!blocked && !r.notAttempted) {
      out.push({ id: row.event_id, publisher: pubs[j]!.name, ok: false, partition: null, offset: null, error: r.error });
    }
  }
}

/** The publishers that did not take a row, as one error text per publisher. */
function failuresOf(pubs: Publisher[], per: PublishResult[]): string[] {
  const f: string[] = [];
  for (let j = 0; j < pubs.length; j++) {
    const r = per[j]!;
    if (!r.ok) f.push(`${pubs[j]!.name}: ${r.error}`);
  }
  return f;
}
