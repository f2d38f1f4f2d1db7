import type { Log } from '../observability/logger.ts';

/**
 * One `txmsg_command_timing` line for every write command (prepare, commit, rollback, ack,
 * resend), as the outbox worker's room commands have theirs: which command, which message, the
 * outcome, `total_ms` and the phases the command knows (prepare: validate, topic check, store).
 * A refused command gets its line too, with the error's name and reason, never the body.
 */
export async function timedCommand<T extends { id: string; status: string }>(
  log: Log,
  command: string,
  id: string | undefined,
  run: () => Promise<T & { phases?: Record<string, number> }>,
): Promise<T> {
  const started = performance.now();
  const total = () => Math.round((performance.now() - started) * 10) / 10;
  try {
    const r = await run();
    log.info('txmsg_command_timing', { command, id: r.id, status: r.status, total_ms: total(), ...r.phases });
    return r;
  } catch (err) {
    const e = err as Error;
    log.info('txmsg_command_timing', { command, id: id ?? null, error: `${e.name}: ${e.message}`, total_ms: total() });
    throw err;
  }
}
