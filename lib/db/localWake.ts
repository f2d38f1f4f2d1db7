import { randomUUID } from 'node:crypto';

/** How many wakes may wait for their NOTIFY at once; beyond it the oldest are forgotten. */
const MAX_PENDING = 10_000;

interface Listener {
  onNotify: (payload: string) => void;
  holdsRoleLock: boolean;
  /** Wakes announced and not yet delivered: whichever comes first, the commit or the NOTIFY, wakes. */
  pending: Set<string>;
  /** Payloads already delivered locally: their NOTIFY is skipped when it arrives. */
  delivered: Set<string>;
}

function remember(set: Set<string>, payload: string): void {
  set.add(payload);
  if (set.size > MAX_PENDING) set.delete(set.values().next().value!);
}

/** A wake-up sent by this process: the NOTIFY's payload, and `now()` once its commit is done. */
export interface LocalWake {
  payload: string;
  /**
   * When the wake was made, a listener of this process held the lock of the role the channel
   * wakes: `now()` reaches the only worker doing that role's work (nobody elsewhere does it until
   * that worker lets go, and its successor starts with a step), so the sender sends no NOTIFY.
   */
  owned: boolean;
  /** Wakes this process's listeners. */
  now(): void;
}

export interface ListenOptions {
  /** The listener is a worker that holds the lock of the role the channel wakes. */
  holdsRoleLock?: boolean;
}

/**
 * Wakes listeners in the same process without the server's round trip. In the twin every role
 * shares one process: the poller's commit can start the pump at once instead of ~0.3 ms later,
 * when its NOTIFY comes back from PostgreSQL. The NOTIFY is still sent, for listeners in other
 * processes; here it carries a payload unique to this wake, and is skipped when it arrives.
 */
export class LocalWakes {
  readonly #listeners = new Map<string, Set<Listener>>();
  readonly #prefix = `wake:${randomUUID().slice(0, 8)}:`;
  #next = 0;

  /** Registers a listener; `notified` is what to call for each NOTIFY the server delivers. */
  add(
    channel: string,
    onNotify: (payload: string) => void,
    options: ListenOptions = {},
  ): { notified: (payload: string) => void; remove: () => void } {
    const listener: Listener = { onNotify, holdsRoleLock: options.holdsRoleLock === true, pending: new Set(), delivered: new Set() };
    let set = this.#listeners.get(channel);
    if (!set) this.#listeners.set(channel, (set = new Set()));
    set.add(listener);
    return {
      notified: (payload) => {
        if (listener.delivered.delete(payload)) return;
        // On a busy machine the NOTIFY can arrive before the committer calls now(): it wakes, now() does not.
        listener.pending.delete(payload);
        onNotify(payload);
      },
      remove: () => set.delete(listener),
    };
  }

  /** `payload` must be unique to this wake (a mailbox ID is); by default one is made up. */
  wake(channel: string, payload = `${this.#prefix}${this.#next++}`): LocalWake {
    // Owned, the sender sends no NOTIFY: there is nothing to skip when it arrives.
    const owned = [...(this.#listeners.get(channel) ?? [])].some((l) => l.holdsRoleLock);
    if (!owned) for (const l of this.#listeners.get(channel) ?? []) remember(l.pending, payload);
    return {
      payload,
      owned,
      now: () => {
        for (const l of this.#listeners.get(channel) ?? []) {
          if (!owned) {
            if (!l.pending.delete(payload)) continue; // its NOTIFY came first and woke it
            remember(l.delivered, payload);
          }
          l.onNotify(payload);
        }
      },
    };
  }
}
