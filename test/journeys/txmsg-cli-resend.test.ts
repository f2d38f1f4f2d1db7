import { join } from 'node:path';
import { expect, it } from 'vitest';
import { fileSink } from '../helpers/fileSink.ts';
import { useJourney, useServer } from '../helpers/journey.ts';
import { waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';
import { callTwin } from '../helpers/twinChild.ts';

/**
 * Journey: an operator finds the dead transactional messages with the CLI and resends them with
 * the CLI (`msgx dead --kind txmsg --phase …`, `msgx resend <id>`), as rtm's back office
 * does by hand. One died unconfirmed (its producer could not say), one died unacknowledged after
 * its deliveries. After the resend the first is checked back again and, the producer now
 * answering COMMIT, delivered; the second is delivered again under the same `msgx-txmsg-id`;
 * both are acknowledged. Judged from outside: the CLI's output, the records in the file sink
 * (`.msgx/events/<topic>.jsonl`) against the deliveries this test expects, and `GET
 * /v1/tx-messages/{id}`.
 *
 * Caught on main: `msgx resend` was an unknown command (and `dead` had no `--phase`).
 */
const TOPIC = 'journey.resend.orders';

let answer = 'UNKNOWN';

const producer = useServer((_req, res) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: answer })),
);
const world = useJourney('resend', {
  env: () => ({
    MSGX_TX_CHECK_ALLOWED_ORIGINS: producer.origin,
    MSGX_TX_CHECK_MAX: '1',
    MSGX_TX_CHECK_INTERVAL: '200ms',
    MSGX_TX_REDELIVERY_SCHEDULE: '0s,2s',
  }),
});

const call = (method: string, path: string, body?: unknown) => callTwin(world.twin, method, path, body);
const statusOf = async (id: string) => (await call('GET', `/v1/tx-messages/${id}`)).body.status;
const until = (what: string, fn: () => Promise<boolean> | boolean) => waitFor(fn, { what, timeoutMs: 60_000, intervalMs: 200 });

/** Deliveries in the file sink, per transactional message id (its msgx-txmsg-id header). */
function deliveries(): Map<string, number> {
  const n = new Map<string, number>();
  for (const r of fileSink(join(world.dir, '.msgx'), TOPIC))
    n.set(r.headers['msgx-txmsg-id']!, (n.get(r.headers['msgx-txmsg-id']!) ?? 0) + 1);
  return n;
}

it(
  'lists dead messages by phase and resends each with the CLI; both are then delivered and acknowledged',
  { timeout: 240_000 },
  async () => {
    const prep = async (checkAfterMs: number) =>
      (
        await call('POST', '/v1/tx-messages', {
          topic: TOPIC,
          payload: { n: checkAfterMs },
          checkUrl: `${producer.origin}/check`,
          checkAfterMs,
        })
      ).body.id as string;
    const unconfirmed = await prep(1);
    const unacked = await prep(600_000);
    expect((await call('POST', `/v1/tx-messages/${unacked}/commit`)).status).toBe(200);
    await until('both dead', async () => (await statusOf(unconfirmed)) === 'DEAD' && (await statusOf(unacked)) === 'DEAD');
    // The model: the unconfirmed one was never delivered, the unacknowledged one twice (0s, 2s).
    expect(Object.fromEntries(deliveries())).toEqual({ [unacked]: 2 });

    const byPhase = async (phase: string) => twinCli(world.twin.base, 'dead', '--kind', 'txmsg', '--phase', phase);
    const check = await byPhase('check');
    const delivery = await byPhase('delivery');
    expect(check).toContain(unconfirmed);
    expect(check).not.toContain(unacked);
    expect(delivery).toContain(unacked);
    expect(delivery).not.toContain(unconfirmed);

    answer = 'COMMIT';
    const first = await twinCli(world.twin.base, 'resend', unconfirmed);
    expect(first).toMatch(/was\s+DEAD \(check\)/);
    expect(first).toMatch(/now\s+PREPARED/);
    expect(first).toContain('checked back');
    const second = await twinCli(world.twin.base, 'resend', unacked);
    expect(second).toMatch(/was\s+DEAD \(delivery\)\s+now\s+COMMITTED/);

    // The model after the resends: each is delivered on a fresh schedule (0s, 2s) — the first once
    // its check-back answers COMMIT — so at least one record more each; an ack counts even if it
    // lands after the schedule ran out again.
    await until('the resent ones delivered', () => (deliveries().get(unconfirmed) ?? 0) >= 1 && (deliveries().get(unacked) ?? 0) >= 3);
    for (const id of [unconfirmed, unacked]) expect((await call('POST', `/v1/tx-messages/${id}/ack`)).body.status).toBe('CONSUMED');
    expect(await statusOf(unacked)).toBe('CONSUMED');

    // A message that is not dead is refused with the reason, and the CLI exits non-zero.
    await expect(twinCli(world.twin.base, 'resend', unacked)).rejects.toMatchObject({ stderr: expect.stringMatching(/409/) });
    await expect(twinCli(world.twin.base, 'resend', 'no-such-id')).rejects.toMatchObject({ stderr: expect.stringMatching(/404/) });
  },
);
