import { expect, it } from 'vitest';
import { useJourney, useServer } from '../helpers/journey.ts';
import { waitFor } from '../helpers/services.ts';
import { callTwin } from '../helpers/twinChild.ts';

/**
 * Journey: the log lines an operator relies on. Every write command on a transactional message
 * leaves one timing line naming the command and the message (a refused one too, with its reason);
 * every message that dies leaves one dead-letter line naming it, whether it died unconfirmed after
 * its check-backs or unacknowledged after its deliveries. Driven over HTTP, judged by the twin's
 * own output (JSON lines) against the list of commands and deaths this test caused.
 *
 * Caught on main: no `txmsg_command_timing` and no `txmsg dead letter` line at all.
 */
const TOPIC = 'journey.logs.orders';

// A producer that never knows: every check-back answers UNKNOWN.
const producer = useServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"UNKNOWN"}'));
const world = useJourney('txlogs', {
  env: () => ({
    MSGX_TX_CHECK_ALLOWED_ORIGINS: producer.origin,
    MSGX_TX_CHECK_MAX: '1',
    MSGX_TX_REDELIVERY_SCHEDULE: '0s,1s',
  }),
});

const call = (method: string, path: string, body?: unknown) => callTwin(world.twin, method, path, body);

const prepare = async (checkAfterMs: number) =>
  (await call('POST', '/v1/tx-messages', { topic: TOPIC, payload: { n: 1 }, checkUrl: `${producer.origin}/check`, checkAfterMs })).body
    .id as string;

/** The twin's JSON log lines with this message text. */
function lines(message: string): Record<string, unknown>[] {
  return world.twin
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.message === message);
}

it('logs a timing line per write command and a dead-letter line per death, naming the message', { timeout: 180_000 }, async () => {
  const kept = await prepare(600_000);
  const dropped = await prepare(600_000);
  const unacked = await prepare(600_000);
  const unconfirmed = await prepare(1);
  expect((await call('POST', `/v1/tx-messages/${kept}/commit`)).status).toBe(200);
  expect((await call('POST', `/v1/tx-messages/${dropped}/rollback`)).status).toBe(200);
  expect((await call('POST', `/v1/tx-messages/${unacked}/commit`)).status).toBe(200);
  expect((await call('POST', `/v1/tx-messages/${kept}/ack`)).status).toBe(200);
  expect((await call('POST', `/v1/tx-messages/${dropped}/ack`)).status).toBe(409);

  // The model of the commands sent, in order: [command, id, outcome].
  const commands = [
    ['prepare', kept, 'PREPARED'],
    ['prepare', dropped, 'PREPARED'],
    ['prepare', unacked, 'PREPARED'],
    ['prepare', unconfirmed, 'PREPARED'],
    ['commit', kept, 'COMMITTED'],
    ['rollback', dropped, 'ROLLED_BACK'],
    ['commit', unacked, 'COMMITTED'],
    ['ack', kept, 'CONSUMED'],
    ['ack', dropped, 'refused'],
  ];
  const timing = lines('txmsg_command_timing').map((l) => [l.command, l.id, l.status ?? (l.error ? 'refused' : '?')]);
  expect(timing).toEqual(commands);
  const refused = lines('txmsg_command_timing').find((l) => l.error)!;
  expect(refused.error).toMatch(/cannot ack .* ROLLED_BACK|ROLLED_BACK/);
  for (const l of lines('txmsg_command_timing')) expect(typeof l.total_ms).toBe('number');
  expect(lines('txmsg_command_timing')[0]).toMatchObject({ validate_ms: expect.any(Number), store_ms: expect.any(Number) });

  // Deaths: `unconfirmed` after its one check-back (UNKNOWN), `unacked` after its 2 deliveries.
  await waitFor(() => lines('txmsg dead letter').length >= 2, { timeoutMs: 60_000, what: 'two dead-letter lines' });
  const dead = new Map(lines('txmsg dead letter').map((l) => [l.id as string, l]));
  expect([...dead.keys()].sort()).toEqual([unacked, unconfirmed].sort());
  expect(dead.get(unconfirmed)).toMatchObject({ level: 'ERROR', topic: TOPIC, phase: 'check', checks: 1 });
  expect(dead.get(unacked)).toMatchObject({ level: 'ERROR', topic: TOPIC, phase: 'delivery', deliveries: 2 });
  // Reported once each: a later death gets its own line, and the earlier two are not repeated.
  const later = await prepare(1);
  await waitFor(() => lines('txmsg dead letter').some((l) => l.id === later), { timeoutMs: 60_000, what: 'the later death' });
  expect(lines('txmsg dead letter').map((l) => l.id)).toHaveLength(3);
});
