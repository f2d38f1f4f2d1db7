import type { Db } from '../db/db.ts';
import { isPaused } from '../pipeline/pause.ts';
import { isRoleLive } from './roleLock.ts';

/**
 * After the ingress stored a message: when no pump is live and the pipeline is not paused, start
 * one now instead of waiting up to a minute for the schedule. The invoke is asynchronous; the
 * started pump takes the lock or, if another beat it, exits at once.
 */
export async function kickIfIdle(db: Db, invoke: () => Promise<void>, role: KickedRole = 'pump'): Promise<boolean> {
  if (await isPaused(db)) return false;
  if (await isRoleLive(db, role)) return false;
  await invoke();
  return true;
}

/**
 * Starts a function asynchronously (InvocationType Event), as the ingress kicks the pump and the
 * poller. The AWS SDK's Lambda client is imported on the first kick, not at cold start: importing
 * it costs 70-150 ms, and most requests find a pump running and never kick.
 */
export function asyncInvoker(): (functionName: string, event?: unknown) => Promise<void> {
  let send: Promise<(name: string, event?: unknown) => Promise<void>> | undefined;
  return async (functionName, event) => {
    send ??= import('@aws-sdk/client-lambda').then(({ LambdaClient, InvokeCommand }) => {
      const client = new LambdaClient({});
      return async (name: string, payload?: unknown) => {
        await client.send(
          new InvokeCommand({
            FunctionName: name,
            InvocationType: 'Event',
            ...(payload === undefined ? {} : { Payload: new TextEncoder().encode(JSON.stringify(payload)) }),
          }),
        );
      };
    });
    send.catch(() => (send = undefined));
    await (
      await send
    )(functionName, event);
  };
}

/** The roles the ingress may start after a stored message. */
export type KickedRole = 'pump' | 'poller' | 'dispatcher';

/** At most one kick per role in this long per container: a burst of sends starts a role once. */
export const KICK_DEBOUNCE_MS = 2_000;

/**
 * The ingress's kicks, debounced per role within one container (a burst of sends costs one lock
 * probe and at most one invoke per role every KICK_DEBOUNCE_MS). Roles switched off are never kicked.
 * Across containers the bound is the ingress's reserved concurrency R (its share of the database's
 * connections, infra-cdk/config.ts connectionBudget): at most R invokes per kicked role in any
 * KICK_DEBOUNCE_MS, and only while no instance of the role holds its lock; each started role that
 * finds the lock taken exits at once, so at most R + 2 of a role run at a time (R kicked, the lock
 * holder and its successor), and one of them works.
 */
export function debouncedKicks(o: {
  targets: Partial<Record<KickedRole, string>>;
  disabled: readonly string[];
  invoke: (functionName: string) => Promise<void>;
  now?: () => number;
}): (db: Db, onError: (role: KickedRole, err: unknown) => void) => Promise<void> {
  const last = new Map<KickedRole, number>();
  const now = o.now ?? Date.now;
  return async (db, onError) => {
    const due = (Object.entries(o.targets) as [KickedRole, string][]).filter(([role]) => {
      if (o.disabled.includes(role)) return false;
      const at = last.get(role);
      if (at !== undefined && now() - at < KICK_DEBOUNCE_MS) return false;
      last.set(role, now());
      return true;
    });
    await Promise.all(due.map(([role, fn]) => kickIfIdle(db, () => o.invoke(fn), role).catch((err: unknown) => onError(role, err))));
  };
}
