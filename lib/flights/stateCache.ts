import type { FlightState } from './model.ts';

/**
 * The flight states a pump wrote, each with the row version it wrote, so that the next group that
 * locks the flight can skip reading it back (the main row and every detail table) when the row is
 * still exactly that version. The lock statement returns the version with the lock, so a state is
 * taken from here only when nothing has written the flight since: not another pump (a second Lambda
 * container, a twin on the same database), not the history sweep, not an operator, and not a
 * rolled-back group (its version never became visible). Anything else is read in full.
 *
 * A row version is `xmin:ctid`: the writing transaction and the tuple's place. xmin alone does not
 * tell two writes of one transaction apart; ctid alone can be reused after vacuum, but never by the
 * same transaction. Bounded: the least recently used flights go first.
 */
export class FlightStateCache {
  readonly #byFlid = new Map<string, { version: string; state: FlightState }>();

  constructor(private readonly capacity = 5000) {}

  /** The cached state if the row is still the version it was cached at. */
  get(flid: string, version: string): FlightState | undefined {
    const hit = this.#byFlid.get(flid);
    if (!hit) return undefined;
    if (hit.version !== version) {
      this.#byFlid.delete(flid);
      return undefined;
    }
    // Map keeps insertion order: moving a hit to the end makes the first entry the least recent.
    this.#byFlid.delete(flid);
    this.#byFlid.set(flid, hit);
    return hit.state;
  }

  /** Remembers a state just written as that row version. States are never mutated (model.ts). */
  set(flid: string, version: string, state: FlightState): void {
    this.#byFlid.delete(flid);
    this.#byFlid.set(flid, { version, state });
    if (this.#byFlid.size > this.capacity) this.#byFlid.delete(this.#byFlid.keys().next().value!);
  }

  get size(): number {
    return this.#byFlid.size;
  }
}

/** The SQL expression of a flight_schd row's version (`alias` names the row), as the cache compares it. */
export const rowVersion = (alias: string) => `${alias}.xmin::text || ':' || ${alias}.ctid::text`;
