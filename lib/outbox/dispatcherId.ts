import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

// Who holds a target's lease: `<host>:<pid>:<random>`, one per dispatcher process.

/** This process's dispatcher id. */
export const PROCESS_DISPATCHER_ID = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

/**
 * Whether `owner` is provably a dispatcher that no longer runs: an id of this host whose process is
 * gone (a twin SIGKILLed and started again, a worker that crashed). Its lease need not run out: no
 * process can publish under it any more. Anything else (another host, a live process, an id of
 * another shape, a process of another user that answers EPERM) is not known to be dead.
 */
export function isDeadLocalDispatcher(owner: string): boolean {
  const last = owner.lastIndexOf(':');
  const before = owner.lastIndexOf(':', last - 1);
  if (before <= 0 || owner.slice(0, before) !== hostname()) return false;
  const pid = Number(owner.slice(before + 1, last));
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
