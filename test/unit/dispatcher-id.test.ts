import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { expect, it } from 'vitest';
import { isDeadLocalDispatcher, PROCESS_DISPATCHER_ID } from '../../lib/outbox/dispatcherId.ts';

/** A real process of this host that has exited: its pid names no process any more. */
async function exitedPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0']);
  await once(child, 'exit');
  return child.pid!;
}

it('a dispatcher id of this host whose process is gone is dead; a live one, this one, another host and other shapes are not', async () => {
  const gone = await exitedPid();
  const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
  try {
    expect(isDeadLocalDispatcher(`${hostname()}:${gone}:1a2b3c4d`)).toBe(true);
    expect(isDeadLocalDispatcher(`${hostname()}:${sleeper.pid}:1a2b3c4d`)).toBe(false);
    expect(isDeadLocalDispatcher(PROCESS_DISPATCHER_ID)).toBe(false);
    expect(isDeadLocalDispatcher(`another-host-${hostname()}:${gone}:1a2b3c4d`)).toBe(false);
    for (const odd of ['first', 'dying', `${hostname()}:x:1`, `${hostname()}::1`, `:${gone}:1`, `${hostname()}:${gone}`])
      expect(isDeadLocalDispatcher(odd), odd).toBe(false);
  } finally {
    sleeper.kill();
  }
});
