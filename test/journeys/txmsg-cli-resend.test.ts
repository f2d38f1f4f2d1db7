import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';
import { callTwin, killTwins, startTwin, type Twin } from '../helpers/twinChild.ts';

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

let pg: TestPg;
let twin: Twin;
let producer: Server;
let origin: string;
let dir: string;
let answer = 'UNKNOWN';

beforeAll(async () => {
  pg = await freshPg({ migrate: false });
  producer = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: answer })),
  );
  await new Promise<void>((r) => producer.listen(0, '127.0.0.1', () => r()));
  origin = `http://127.0.0.1:${(producer.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'msgx-resend-'));
  twin = await startTwin(
    {
      MSGX_PG_URL: pg.url,
      MSGX_TX_CHECK_ALLOWED_ORIGINS: origin,
      MSGX_TX_CHECK_MAX: '1',
      MSGX_TX_CHECK_INTERVAL: '200ms',
      MSGX_TX_REDELIVERY_SCHEDULE: '0s,2s',
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
    },
    dir,
  );
}, 180_000);
afterAll(async () => {
  await twin?.stop('SIGTERM', { killAfterMs: 10_000 });
  killTwins();
  producer?.close();
  await pg?.drop();
});

const call = (method: string, path: string, body?: unknown) => callTwin(twin, method, path, body);
const statusOf = async (id: string) => (await call('GET', `/v1/tx-messages/${id}`)).body.status;
const until = (what: string, fn: () => Promise<boolean> | boolean) => waitFor(fn, { what, timeoutMs: 60_000, intervalMs: 200 });

/** Deliveries in the file sink, per transactional message id (its msgx-txmsg-id header). */
function deliveries(): Map<string, number> {
  const file = join(dir, '.msgx', 'events', `${TOPIC}.jsonl`);
  const n = new Map<string, number>();
  if (!existsSync(file)) return n;
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const id = (JSON.parse(line) as { headers: Record<string, string> }).headers['msgx-txmsg-id']!;
    n.set(id, (n.get(id) ?? 0) + 1);
  }
  return n;
}

it(
  'lists dead messages by phase and resends each with the CLI; both are then delivered and acknowledged',
  { timeout: 240_000 },
  async () => {
    const prep = async (checkAfterMs: number) =>
      (await call('POST', '/v1/tx-messages', { topic: TOPIC, payload: { n: checkAfterMs }, checkUrl: `${origin}/check`, checkAfterMs }))
        .body.id as string;
    const unconfirmed = await prep(1);
    const unacked = await prep(600_000);
    expect((await call('POST', `/v1/tx-messages/${unacked}/commit`)).status).toBe(200);
    await until('both dead', async () => (await statusOf(unconfirmed)) === 'DEAD' && (await statusOf(unacked)) === 'DEAD');
    // The model: the unconfirmed one was never delivered, the unacknowledged one twice (0s, 2s).
    expect(Object.fromEntries(deliveries())).toEqual({ [unacked]: 2 });

    const byPhase = async (phase: string) => twinCli(twin.base, 'dead', '--kind', 'txmsg', '--phase', phase);
    const check = await byPhase('check');
    const delivery = await byPhase('delivery');
    expect(check).toContain(unconfirmed);
    expect(check).not.toContain(unacked);
    expect(delivery).toContain(unacked);
    expect(delivery).not.toContain(unconfirmed);

    answer = 'COMMIT';
    const first = await twinCli(twin.base, 'resend', unconfirmed);
    expect(first).toMatch(/was\s+DEAD \(check\)/);
    expect(first).toMatch(/now\s+PREPARED/);
    expect(first).toContain('checked back');
    const second = await twinCli(twin.base, 'resend', unacked);
    expect(second).toMatch(/was\s+DEAD \(delivery\)\s+now\s+COMMITTED/);

    // The model after the resends: each is delivered on a fresh schedule (0s, 2s) — the first once
    // its check-back answers COMMIT — so at least one record more each; an ack counts even if it
    // lands after the schedule ran out again.
    await until('the resent ones delivered', () => (deliveries().get(unconfirmed) ?? 0) >= 1 && (deliveries().get(unacked) ?? 0) >= 3);
    for (const id of [unconfirmed, unacked]) expect((await call('POST', `/v1/tx-messages/${id}/ack`)).body.status).toBe('CONSUMED');
    expect(await statusOf(unacked)).toBe('CONSUMED');

    // A message that is not dead is refused with the reason, and the CLI exits non-zero.
    await expect(twinCli(twin.base, 'resend', unacked)).rejects.toMatchObject({ stderr: expect.stringMatching(/409/) });
    await expect(twinCli(twin.base, 'resend', 'no-such-id')).rejects.toMatchObject({ stderr: expect.stringMatching(/404/) });
  },
);
