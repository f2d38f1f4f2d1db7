import type { PublishResult } from './types.ts';

/*
 * The outcome log of the relay (outbox_batch, migration 016): per finished batch one row per
 * publisher that took events in it, with their ids and, for Kafka, partition and offset. Written by
 * a CTE of the statement that already finishes the batch, so it costs no round trip and a constant
 * number of rows per batch. The trace reads it through msgx_event_deliveries.
 */

/** What one batch's publishers took, flattened into parallel arrays (one entry per event and publisher). */
export class BatchLog {
  readonly #publishers: string[] = [];
  readonly #pub: number[] = [];
  readonly #ids: number[] = [];
  readonly #partitions: (number | null)[] = [];
  readonly #offsets: (number | null)[] = [];
  readonly #tries: number[] = [];

  /** Records that `publisher` took event `eventId` on try `tries`; a result that is not a send of this batch is ignored. */
  add(publisher: string, eventId: number, result: PublishResult | { ok: true; partition?: number; offset?: number }, tries: number): void {
    // `already`: an earlier try of a fan-out delivered it to this publisher, which was skipped now.
    if (!result.ok || (result as { already?: boolean }).already) return;
    let p = this.#publishers.indexOf(publisher);
    if (p < 0) p = this.#publishers.push(publisher) - 1;
    this.#pub.push(p + 1);
    this.#ids.push(eventId);
    this.#partitions.push(result.partition ?? null);
    this.#offsets.push(result.offset ?? null);
    this.#tries.push(tries);
  }

  get size(): number {
    return this.#ids.length;
  }

  /** The values of the parameters `batchLogCte` names, in order. */
  params(): unknown[] {
    return [this.#publishers, this.#pub, this.#ids, this.#partitions, this.#offsets, this.#tries];
  }
}

/**
 * A CTE (`name AS (INSERT …)`) writing a BatchLog's rows: its parameters are `$first` … `$first+5`
 * (BatchLog.params()), `target` and `at` are SQL expressions of the enclosing statement, and `from`
 * a FROM item the insert joins (the finish's own CTE, so nothing is written for a batch no longer ours).
 */
export function batchLogCte(name: string, first: number, o: { target: string; at: string; from?: string }): string {
  const $ = (k: number) => `$${first + k}`;
  return `${name} AS (
  INSERT INTO outbox_batch (target, publisher, sent_at, lo_id, hi_id, event_ids, partitions, offsets, tries)
  SELECT ${o.target}, (${$(0)}::text[])[v.p], ${o.at}, min(v.id), max(v.id), array_agg(v.id ORDER BY v.n),
    CASE WHEN count(v.part) > 0 THEN array_agg(v.part ORDER BY v.n) END,
    CASE WHEN count(v.off) > 0 THEN array_agg(v.off ORDER BY v.n) END,
    CASE WHEN bool_or(v.tries > 1) THEN array_agg(v.tries ORDER BY v.n) END
  FROM ${o.from ? `${o.from}, ` : ''}unnest(${$(1)}::int[], ${$(2)}::bigint[], ${$(3)}::int[], ${$(4)}::bigint[], ${$(5)}::int[])
       WITH ORDINALITY AS v(p, id, part, off, tries, n)
  GROUP BY v.p)`;
}

/** Adds what each publisher took of `rows` (`results`: per event id, one result per publisher in `pubs` order). */
export function addResults(
  log: BatchLog,
  pubs: { name: string }[],
  rows: { event_id: number; attempts: number }[],
  results: Map<number, PublishResult[]>,
): void {
  for (const r of rows) {
    const per = results.get(r.event_id);
    if (per) pubs.forEach((p, j) => per[j] && log.add(p.name, r.event_id, per[j], r.attempts + 1));
  }
}
