import type { ClaimedRow } from './claim.ts';
import { backoffMs, type DeliverySettings } from './settings.ts';
import type { Publisher, PublishResult } from './types.ts';

/* Pure: from what the publishers answered to each claimed row's next state. No I/O here, so the
 * retry, dead and no-overtaking rules can be read apart from the database. */

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

/** The next state of every claimed row, and the per-publisher outcomes to record. */
export function decide(
  pubs: Publisher[],
  settings: DeliverySettings,
  now: Date,
  claimed: ClaimedRow[],
  sendRows: ClaimedRow[],
  results: PublishResult[][],
  isSchd: boolean,
): { updates: RowUpdate[]; outcomes: Outcome[] } {
  const nowMs = now.getTime();
  // Decide every row's next state.
  const updates: RowUpdate[] = [];
  const outcomes: Outcome[] = [];
  const failedNow = (row: ClaimedRow, error: string, per: PublishResult[]): RowUpdate => {
    // Every failing publisher was unreachable: an outage, not this event's fault. It keeps its
    // attempts and is tried again after the initial backoff, so a broker outage of any length
    // kills no event and delivery resumes within that backoff of the broker's return. Anything
    // else (docs/outbox.md "Which failures spend an attempt") is charged to the event.
    if (per.every((p) => p.ok || p.unavailable))
      return { id: row.event_id, status: 'PENDING', attempts: row.attempts, nextAt: new Date(nowMs + settings.initialBackoffMs), error, sentAs: null, stalled: true };
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
  };

  if (!isSchd) {
    let blocked = false;
    for (let i = 0; i < sendRows.length; i++) {
      const row = sendRows[i]!;
      const per = results.map((rs) => rs[i]!);
      collectOutcomes(outcomes, row, pubs, per, blocked);
      if (blocked) {
        updates.push({ id: row.event_id, status: 'PENDING', attempts: row.attempts, nextAt: null, error: null, sentAs: null });
        continue;
      }
      const failures = failuresOf(pubs, per);
      if (failures.length === 0) {
        updates.push({ id: row.event_id, status: 'SENT', attempts: row.attempts, nextAt: null, error: null, sentAs: null });
      } else {
        // The first event not taken by every publisher: it alone is charged; the rest of the
        // run goes back to PENDING behind it (no overtaking).
        updates.push(failedNow(row, failures.join('; '), per));
        blocked = true;
      }
    }
  } else {
    const members = new Map<number, ClaimedRow[]>();
    for (const r of claimed) {
      const list = members.get(r.newest_id!) ?? [];
      list.push(r);
      members.set(r.newest_id!, list);
    }
    for (let i = 0; i < sendRows.length; i++) {
      const row = sendRows[i]!;
      const per = results.map((rs) => rs[i]!);
      collectOutcomes(outcomes, row, pubs, per, false);
      const failures = failuresOf(pubs, per);
      const others = (members.get(row.event_id) ?? []).filter((m) => m.event_id !== row.event_id);
      if (failures.length === 0) {
        updates.push({ id: row.event_id, status: 'SENT', attempts: row.attempts, nextAt: null, error: null, sentAs: null });
        for (const m of others)
          updates.push({ id: m.event_id, status: 'SENT', attempts: m.attempts, nextAt: null, error: null, sentAs: row.event_id });
        continue;
      }
      const onlyNotAttempted = per.every((p) => p.ok || p.notAttempted);
      const u = onlyNotAttempted
        ? { id: row.event_id, status: 'PENDING' as const, attempts: row.attempts, nextAt: null, error: null, sentAs: null }
        : failedNow(row, failures.join('; '), per);
      updates.push(u);
      for (const m of others) {
        // The versions it stands for share its fate: merged again next flush, or dead with it.
        updates.push(
          u.status === 'DEAD'
            ? { id: m.event_id, status: 'DEAD', attempts: m.attempts, nextAt: null, error: `superseded by dead event ${row.event_id}`, sentAs: row.event_id }
            : { id: m.event_id, status: 'PENDING', attempts: m.attempts, nextAt: null, error: null, sentAs: null },
        );
      }
    }
  }

  return { updates, outcomes };
}

/** event_delivery rows to write: each publisher's answer, except skips and failures behind a blocked head. */
function collectOutcomes(out: Outcome[], row: ClaimedRow, pubs: Publisher[], per: PublishResult[], blocked: boolean) {
  for (let j = 0; j < pubs.length; j++) {
    const r = per[j]!;
    if ((r as { already?: boolean }).already) continue;
    if (r.ok) {
      out.push({ id: row.event_id, publisher: pubs[j]!.name, ok: true, partition: r.partition ?? null, offset: r.offset ?? null, error: null });
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
