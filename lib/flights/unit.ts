import type { DecodedMessage } from '../codec/message.ts';
import type { ResourceKind } from '../codec/vocabulary.ts';
import type { Queryable } from '../db/db.ts';
import { enqueueEvents, type NewEvent } from '../outbox/enqueue.ts';
import type { GroupParticipant, GroupScope } from '../pipeline/groupScope.ts';
import type { ProcessContext } from '../pipeline/processor.ts';
import type { FlightState } from './model.ts';
import { archivedVersionFloors } from './history.ts';
import { FlightStateCache } from './stateCache.ts';
import { loadFlightsForUpdate, writeFlights } from './store.ts';

const UNIT = Symbol('flights.unit');
const WRITTEN = Symbol('flights.written');

/**
 * The flight module's unit of work for one pump group. The first read loads (and locks) every
 * flight the group's messages mention, in one query; each message then works on the in-memory
 * state; at the end the changed flights are written in one statement and their events inserted in
 * one statement, in message order. A failing message's staged changes are undone, so the outcome
 * is exactly that of applying the successful messages one by one.
 */
export class FlightUnit implements GroupParticipant {
  /** Current state per FLID as of the messages applied so far (null: no such flight). */
  readonly #working = new Map<string, FlightState | null>();
  /** For flights not in the live tables: the version they had reached before the history sweep. */
  readonly #floors = new Map<string, number>();
  /** Changed collections per changed FLID (the main row is always written). */
  readonly #changed = new Map<string, Set<ResourceKind>>();
  #events: NewEvent[] = [];
  #prefetch: Set<string>;
  #journal: { working: Map<string, FlightState | null>; changed: Map<string, Set<ResourceKind> | undefined>; events: number } | null = null;

  constructor(
    /** Reads and the final write go through this transaction (the group's, not a message's savepoint). */
    private readonly tx: Queryable,
    messages: readonly DecodedMessage[],
    private readonly timezone: string,
    private readonly now: Date,
    /** The states this database's pump wrote in earlier groups (flights that nobody changed since are not read again). */
    private readonly written?: FlightStateCache,
  ) {
    this.#prefetch = new Set(messages.flatMap(flidsOf));
  }

  /** The working state of these flights; loads (FOR UPDATE) the ones not seen yet, with the prefetch set. */
  async read(flids: string[]): Promise<Map<string, FlightState>> {
    const missing = flids.filter((f) => !this.#working.has(f));
    if (missing.length > 0) {
      const toLoad = [...new Set([...missing, ...[...this.#prefetch].filter((f) => !this.#working.has(f))])].sort();
      const loaded = await loadFlightsForUpdate(this.tx, toLoad, this.written);
      // Loaded state is the base, not a change of the current message: no journal entry.
      for (const f of toLoad) this.#working.set(f, loaded.get(f) ?? null);
      // Only flights absent from the live tables may have been archived: one more query, and only then.
      const absent = toLoad.filter((f) => !loaded.has(f));
      for (const [f, v] of await archivedVersionFloors(this.tx, absent)) this.#floors.set(f, v);
      this.#prefetch.clear();
    }
    const out = new Map<string, FlightState>();
    for (const f of flids) {
      const s = this.#working.get(f);
      if (s) out.set(f, s);
    }
    return out;
  }

  /** The version a flight not in the live tables continues from (0 if it was never archived). */
  versionFloor(flid: string): number {
    return this.#floors.get(flid) ?? 0;
  }

  /** Stages a flight's next state, the collections that changed, and its events. */
  stage(next: FlightState, kinds: ResourceKind[], events: NewEvent[]): void {
    const j = this.#journal;
    if (j && !j.working.has(next.flid)) j.working.set(next.flid, this.#working.get(next.flid) ?? null);
    if (j && !j.changed.has(next.flid)) {
      const cur = this.#changed.get(next.flid);
      j.changed.set(next.flid, cur ? new Set(cur) : undefined);
    }
    this.#working.set(next.flid, next);
    const set = this.#changed.get(next.flid) ?? new Set<ResourceKind>();
    for (const k of kinds) set.add(k);
    this.#changed.set(next.flid, set);
    this.#events.push(...events);
  }

  begin(): void {
    this.#journal = { working: new Map(), changed: new Map(), events: this.#events.length };
  }

  commit(): void {
    this.#journal = null;
  }

  rollback(): void {
    const j = this.#journal;
    if (!j) return;
    for (const [flid, prev] of j.working) this.#working.set(flid, prev);
    for (const [flid, prev] of j.changed) {
      if (prev) this.#changed.set(flid, prev);
      else this.#changed.delete(flid);
    }
    this.#events.length = j.events;
    this.#journal = null;
  }

  async flush(): Promise<void> {
    const tx = this.tx;
    const writes = [...this.#changed].map(([flid, kinds]) => ({ state: this.#working.get(flid)!, kinds: [...kinds] }));
    await writeFlights(tx, writes, this.timezone, this.written);
    await enqueueEvents(tx, this.#events, { now: this.now });
    this.#changed.clear();
    this.#events = [];
  }
}

/** The group's unit when the pump runs the processor, else a private one the caller must flush. */
export function flightUnit(ctx: ProcessContext): { unit: FlightUnit; standalone: boolean } {
  if (ctx.group)
    return {
      unit: ctx.group.participant(
        UNIT,
        () => new FlightUnit(ctx.group!.tx, ctx.group!.messages, ctx.config.timezone, ctx.now, writtenFlightStates(ctx.group!)),
      ),
      standalone: false,
    };
  return { unit: new FlightUnit(ctx.tx, [ctx.message], ctx.config.timezone, ctx.now), standalone: true };
}

function flidsOf(m: DecodedMessage): string[] {
  const p = m.payload;
  if (p.kind === 'SCHD' || p.kind === 'FLOP') return p.flights.flatMap((f) => (f.FLID ? [f.FLID] : []));
  if (p.kind === 'FDEL') return p.flids;
  return [];
}

/** The flight states the pump wrote on this group's database, kept from group to group. */
export function writtenFlightStates(group: GroupScope): FlightStateCache {
  return group.retained(WRITTEN, () => new FlightStateCache());
}
