import { join } from 'node:path';
import { expect, it } from 'vitest';
import { fileSink } from '../helpers/fileSink.ts';
import { prepareForHungProducer, useHungProducer, useJourney } from '../helpers/journey.ts';
import { callTwin } from '../helpers/twinChild.ts';
import { waitFor } from '../helpers/services.ts';

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

const hung = useHungProducer();
const world = useJourney('sweep', {
  env: () => ({ MSGX_TX_CHECK_ALLOWED_ORIGINS: hung.origin, MSGX_TX_REDELIVERY_SCHEDULE: '0s,1s,1s' }),
});

const post = (path: string, body?: unknown) => callTwin(world.twin, 'POST', path, body);

/** Deliveries of one transactional message, as the file sink holds them (header msgx-txmsg-id). */
const deliveriesOf = (id: string) => fileSink(join(world.dir, '.msgx'), TOPIC).filter((r) => r.headers['msgx-txmsg-id'] === id).length;

it('redelivers and kills on schedule while a hung producer holds its own check-backs', { timeout: 240_000 }, async () => {
  // The hung producer's messages: prepared, never decided, each check allowed its full 60 s.
  await prepareForHungProducer(world, hung, TOPIC, UNCONFIRMED);
  await waitFor(() => hung.seen > 0, { timeoutMs: 60_000, what: 'the first check-back call to reach the hung producer' });

  // Another producer commits at once; its consumer never acknowledges. Model: 3 deliveries (0s, 1s, 1s), then DEAD.
  const prep = await post('/v1/tx-messages', {
    topic: TOPIC,
    payload: { order: 'x' },
    checkUrl: `${hung.origin}/never`,
    checkAfterMs: 600_000,
  });
  expect(prep.status).toBe(201);
  const id = String(prep.body.id);
  expect((await post(`/v1/tx-messages/${id}/commit`)).status).toBe(200);

  await waitFor(
    async () => ((await (await fetch(`${world.twin.base}/v1/tx-messages/${id}`)).json()) as { status: string }).status === 'DEAD',
    {
      timeoutMs: 120_000,
      what: `message ${id} to be DEAD after its last delivery`,
    },
  );
  expect(deliveriesOf(id)).toBe(3);
  // All of that happened while the hung producer's calls were still waiting: none timed out yet,
  // and no more than the check-back's concurrency were out at once.
  expect(hung.closed).toBe(0);
  expect(hung.open.size).toBeGreaterThan(0);
  expect(hung.seen).toBeLessThanOrEqual(8);
});
