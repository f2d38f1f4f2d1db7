/**
 * The IDs this process's poller has just enqueued, as a hint for this process's pump (the twin
 * runs both): a pump woken by them reads their mailbox texts while it reads the head, instead of
 * after, one round trip less on the wake-up path. Only a small batch is noted: under a backlog
 * the pump reads ahead by itself (lib/pipeline/pump.ts). A stale hint costs one needless read.
 */
const hints = new WeakMap<object, number[]>();

export function noteEnqueued(mailbox: object, ids: number[], max: number): void {
  if (ids.length > 0 && ids.length <= max) hints.set(mailbox, ids);
}

export function takeEnqueued(mailbox: object): number[] {
  const ids = hints.get(mailbox) ?? [];
  hints.delete(mailbox);
  return ids;
}
