import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';
import { killTwins, startTwin, type Twin } from '../helpers/twinChild.ts';

/**
 * Journey: archiving is not starved by a hung producer either (maintenance is bounded by time).
 * A first twin with its sweep switched off (MSGX_DISABLED_ROLES=sweep) takes 20 half messages
 * whose producer accepts check-backs and never answers, and one message that is committed,
 * delivered and acknowledged. A second twin on the same database runs the sweep: its very first
 * step starts the hung check-backs, and in that same step the consumed message must move to
 * history (MSGX_TX_RETENTION=1ms) while every hung call is still open. Judged from outside:
 * `GET /v1/tx-messages/{id}` (`archived`, status) and the hung server's own count of open and
 * closed calls.
 *
 * Seen to fail with the sweep step waiting for its check-back calls before the tasks after it
 * (`await`ing the calls in checkBackRunner's run): archived only once the 60 s calls closed.
 */
const TOPIC = 'journey.archive.orders';
const UNCONFIRMED = 20;

let pg: TestPg;
let twin: Twin | undefined;
let dir: string;
let hung: Server;
let hungOrigin: string;
const open = new Set<Socket>();
let callsSeen = 0;
let callsClosed = 0;

beforeAll(async () => {
  pg = await freshPg({ migrate: false });
  hung = createServer((req) => {
    callsSeen++;
    open.add(req.socket);
    req.socket.once('close', () => {
      open.delete(req.socket);
      callsClosed++;
    });
  });
  await new Promise<void>((r) => hung.listen(0, '127.0.0.1', () => r()));
  hungOrigin = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'msgx-archive-'));
}, 60_000);
afterAll(async () => {
  await twin?.stop('SIGTERM', { killAfterMs: 10_000 });
  killTwins();
  for (const s of open) s.destroy();
  hung?.close();
  await pg?.drop();
});

const env = (more: Record<string, string>) => ({
  MSGX_PG_URL: pg.url,
  MSGX_TX_CHECK_ALLOWED_ORIGINS: hungOrigin,
  MSGX_TX_RETENTION: '1ms',
  MSGX_DELIVERY_POLL_INTERVAL: '200ms',
  ...more,
});
const post = (path: string, body?: unknown) =>
  fetch(`${twin!.base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const view = async (id: string) =>
  (await (await fetch(`${twin!.base}/v1/tx-messages/${id}`)).json()) as { status: string; archived: boolean };

it('moves a consumed message to history in the sweep step that starts the hung check-backs', { timeout: 240_000 }, async () => {
  twin = await startTwin(env({ MSGX_DISABLED_ROLES: 'sweep' }), dir);
  for (let i = 0; i < UNCONFIRMED; i++) {
    const res = await post('/v1/tx-messages', {
      topic: TOPIC,
      payload: { order: i },
      checkUrl: `${hungOrigin}/check`,
      checkAfterMs: 1,
      checkTimeoutMs: 60_000,
    });
    expect(res.status).toBe(201);
  }
  const prep = await post('/v1/tx-messages', {
    topic: TOPIC,
    payload: { order: 'x' },
    checkUrl: `${hungOrigin}/never`,
    checkAfterMs: 600_000,
  });
  const { id } = (await prep.json()) as { id: string };
  expect((await post(`/v1/tx-messages/${id}/commit`)).status).toBe(200);
  await waitFor(async () => (await view(id)).status === 'DELIVERED', { timeoutMs: 60_000, what: 'the message delivered' });
  expect((await post(`/v1/tx-messages/${id}/ack`)).status).toBe(200);
  // Model: consumed, not yet in history (no sweep ran), and no check-back was ever made.
  expect(await view(id)).toMatchObject({ status: 'CONSUMED', archived: false });
  expect(callsSeen).toBe(0);
  await twin.stop('SIGTERM', { killAfterMs: 10_000 });

  // Past its retention already; the sweep's archive task runs in its first step, then hourly.
  twin = await startTwin(env({}), dir);
  await waitFor(async () => (await view(id)).archived, { timeoutMs: 50_000, intervalMs: 200, what: 'the consumed message in history' });
  expect(await view(id)).toMatchObject({ status: 'CONSUMED', archived: true });
  // Archived while the hung producer's calls were all still waiting, none timed out.
  expect(callsSeen).toBeGreaterThan(0);
  expect(callsClosed).toBe(0);
  expect(open.size).toBeGreaterThan(0);
});
