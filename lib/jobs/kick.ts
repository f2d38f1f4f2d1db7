import type { Db } from '../db/db.ts';
import { isPaused } from '../pipeline/pause.ts';
import { isRoleLive } from './roleLock.ts';

/**
 * After the ingress stored a message: when no pump is live and the pipeline is not paused, start
 * one now instead of waiting up to a minute for the schedule. The invoke is asynchronous; the
 * started pump takes the lock or, if another beat it, exits at once.
 */
export async function kickPumpIfIdle(db: Db, invoke: () => Promise<void>, role: 'pump' | 'poller' = 'pump'): Promise<boolean> {
  if (await isPaused(db)) return false;
  if (await isRoleLive(db, role)) return false;
  await invoke();
  return true;
}
