import { expect, it } from 'vitest';
import { prepareForHungProducer, useHungProducer, useJourney } from '../helpers/journey.ts';
import { callTwin } from '../helpers/twinChild.ts';
import { waitFor } from '../helpers/services.ts';

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

const hung = useHungProducer();
const world = useJourney('archive', {
  startTwin: false,
  env: () => ({ MSGX_TX_CHECK_ALLOWED_ORIGINS: hung.origin, MSGX_TX_RETENTION: '1ms' }),
});
const post = (path: string, body?: unknown) => callTwin(world.twin, 'POST', path, body);
const view = async (id: string) =>
  (await (await fetch(`${world.twin.base}/v1/tx-messages/${id}`)).json()) as { status: string; archived: boolean };

it('moves a consumed message to history in the sweep step that starts the hung check-backs', { timeout: 240_000 }, async () => {
  const twin = await world.start({ MSGX_DISABLED_ROLES: 'sweep' });
  await prepareForHungProducer(world, hung, TOPIC, UNCONFIRMED);
  const prep = await post('/v1/tx-messages', {
    topic: TOPIC,
    payload: { order: 'x' },
    checkUrl: `${hung.origin}/never`,
    checkAfterMs: 600_000,
  });
  const id = String(prep.body.id);
  expect((await post(`/v1/tx-messages/${id}/commit`)).status).toBe(200);
  await waitFor(async () => (await view(id)).status === 'DELIVERED', { timeoutMs: 60_000, what: 'the message delivered' });
  expect((await post(`/v1/tx-messages/${id}/ack`)).status).toBe(200);
  // Model: consumed, not yet in history (no sweep ran), and no check-back was ever made.
  expect(await view(id)).toMatchObject({ status: 'CONSUMED', archived: false });
  expect(hung.seen).toBe(0);
  await twin.stop('SIGTERM', { killAfterMs: 10_000 });

  // Past its retention already; the sweep's archive task runs in its first step, then hourly.
  await world.start();
  await waitFor(async () => (await view(id)).archived, { timeoutMs: 50_000, intervalMs: 200, what: 'the consumed message in history' });
  expect(await view(id)).toMatchObject({ status: 'CONSUMED', archived: true });
  // Archived while the hung producer's calls were all still waiting, none timed out.
  expect(hung.seen).toBeGreaterThan(0);
  expect(hung.closed).toBe(0);
  expect(hung.open.size).toBeGreaterThan(0);
});
