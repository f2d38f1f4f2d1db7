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

/**
 * Starts a function asynchronously (InvocationType Event), as the ingress kicks the pump and the
 * poller. The AWS SDK's Lambda client is imported on the first kick, not at cold start: importing
 * it costs 70-150 ms, and most requests find a pump running and never kick.
 */
export function asyncInvoker(): (functionName: string) => Promise<void> {
  let send: Promise<(name: string) => Promise<void>> | undefined;
  return async (functionName) => {
    send ??= import('@aws-sdk/client-lambda').then(({ LambdaClient, InvokeCommand }) => {
      const client = new LambdaClient({});
      return async (name: string) => {
        await client.send(new InvokeCommand({ FunctionName: name, InvocationType: 'Event' }));
      };
    });
    send.catch(() => (send = undefined));
    await (
      await send
    )(functionName);
  };
}
