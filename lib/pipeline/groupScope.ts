import type { DecodedMessage } from '../codec/message.ts';
import type { Queryable } from '../db/db.ts';

/**
 * Work a domain module defers to the end of the pump's group transaction (its unit of work).
 * The pump tells it when each message begins, succeeds or fails, so a failing message's staged
 * changes vanish exactly as its SQL writes vanish at its savepoint.
 */
export interface GroupParticipant {
  begin(): void;
  commit(): void;
  rollback(): void;
  /** Writes what the group's successful messages staged; runs once, before the group commits. */
  flush(): Promise<void>;
}

/**
 * One per group commit. Lets a processor share state across the messages of a group — e.g. the
 * flight module reads every flight the group touches in one query and writes them all in one
 * statement — while each message still succeeds or fails on its own.
 */
export class GroupScope {
  readonly #participants = new Map<symbol, GroupParticipant>();
  #inMessage = false;

  /**
   * `tx` is the group's own transaction, outside any message's savepoint: what a participant
   * reads or locks through it stays valid whatever happens to the message that asked. `database`
   * is the pool the transaction came from: what a module keeps between groups is kept per database.
   */
  constructor(
    readonly tx: Queryable,
    readonly messages: readonly DecodedMessage[],
    private readonly database: object = {},
  ) {}

  /**
   * What a module keeps from one group to the next on the same database (the flight states it
   * wrote). Only a hint: whoever keeps something must check it against the database before use, as
   * other writers and rolled-back groups can make it stale. Per database, because one process may
   * serve several (tests, the bench) and what holds in one says nothing of another.
   */
  retained<T>(key: symbol, create: () => T): T {
    let kept = retainedByDatabase.get(this.database);
    if (!kept) retainedByDatabase.set(this.database, (kept = new Map()));
    if (!kept.has(key)) kept.set(key, create());
    return kept.get(key) as T;
  }

  participant<T extends GroupParticipant>(key: symbol, create: () => T): T {
    let p = this.#participants.get(key) as T | undefined;
    if (!p) {
      p = create();
      this.#participants.set(key, p);
      if (this.#inMessage) p.begin();
    }
    return p;
  }

  begin(): void {
    this.#inMessage = true;
    for (const p of this.#participants.values()) p.begin();
  }

  commit(): void {
    this.#inMessage = false;
    for (const p of this.#participants.values()) p.commit();
  }

  rollback(): void {
    this.#inMessage = false;
    for (const p of this.#participants.values()) p.rollback();
  }

  async flush(): Promise<void> {
    for (const p of this.#participants.values()) await p.flush();
  }
}

const retainedByDatabase = new WeakMap<object, Map<symbol, unknown>>();
