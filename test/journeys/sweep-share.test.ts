import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshPg, type TestPg, waitFor } from '../helpers/services.ts';
import { killTwins, startTwin, type Twin } from '../helpers/twinChild.ts';

/**
 * Journey: a producer whose check-back endpoint accepts the connection and never answers, with
 * many unconfirmed messages (maintenance is bounded and starves nothing). Another
 * producer's committed message, never acknowledged, must still be redelivered on its schedule and
 * die after its last delivery — while the hung producer's calls are all still waiting (none has
 * reached its 60 s timeout). Judged from outside: the file sink's lines for that message, its
 * status over HTTP, and the hung server's own count of open and closed calls.
 *
 * Caught when the sweep waits for its check-back round before redelivery (main before this test:
 * 20 hung calls, 8 at a time, held the sweep ~3 minutes; redelivery came only after calls closed).
 */
const TOPIC = 'journey.sweep.orders';
const UNCONFIRMED = 20;

let pg: TestPg;
let twin: Twin;
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
    // Accept, read, never answer: the producer's service is hung.
    open.add(req.socket);
    req.socket.once('close', () => {
      open.delete(req.socket);
      callsClosed++;
    });
  });
  await new Promise<void>((r) => hung.listen(0, '127.0.0.1', () => r()));
  hungOrigin = `http://127.0.0.1:${(hung.address() as AddressInfo).port}`;
  dir = mkdtempSync(join(tmpdir(), 'msgx-sweep-'));
  twin = await startTwin(
    {
      MSGX_PG_URL: pg.url,
      MSGX_TX_CHECK_ALLOWED_ORIGINS: hungOrigin,
      MSGX_TX_REDELIVERY_SCHEDULE: '0s,1s,1s',
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
    },
    dir,
  );
}, 180_000);
afterAll(async () => {
  await twin?.stop('SIGTERM', { killAfterMs: 10_000 });
  killTwins();
  for (const s of open) s.destroy();
  hung?.close();
  await pg?.drop();
});

async function post(path: string, body?: unknown): Promise<Response> {
  return fetch(`${twin.base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** Deliveries of one transactional message, as the file sink holds them (header msgx-txmsg-id). */
function deliveriesOf(id: string): number {
  const file = join(dir, '.msgx', 'events', `${TOPIC}.jsonl`);
  if (!existsSync(file)) return 0;
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .filter((l) => (JSON.parse(l) as { headers: Record<string, string> }).headers['msgx-txmsg-id'] === id).length;
}

it('redelivers and kills on schedule while a hung producer holds its own check-backs', { timeout: 240_000 }, async () => {
  // The hung producer's messages: prepared, never decided, each check allowed its full 60 s.
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
  await waitFor(() => callsSeen > 0, { timeoutMs: 60_000, what: 'the first check-back call to reach the hung producer' });

  // Another producer commits at once; its consumer never acknowledges. Model: 3 deliveries (0s, 1s, 1s), then DEAD.
  const prep = await post('/v1/tx-messages', {
    topic: TOPIC,
    payload: { order: 'x' },
    checkUrl: `${hungOrigin}/never`,
    checkAfterMs: 600_000,
  });
  expect(prep.status).toBe(201);
  const { id } = (await prep.json()) as { id: string };
  expect((await post(`/v1/tx-messages/${id}/commit`)).status).toBe(200);

  await waitFor(async () => ((await (await fetch(`${twin.base}/v1/tx-messages/${id}`)).json()) as { status: string }).status === 'DEAD', {
    timeoutMs: 120_000,
    what: `message ${id} to be DEAD after its last delivery`,
  });
  expect(deliveriesOf(id)).toBe(3);
  // All of that happened while the hung producer's calls were still waiting: none timed out yet,
  // and no more than the check-back's concurrency were out at once.
  expect(callsClosed).toBe(0);
  expect(open.size).toBeGreaterThan(0);
  expect(callsSeen).toBeLessThanOrEqual(8);
});
