import { expect, it } from 'vitest';
import { useJourney, useServer } from '../helpers/journey.ts';
import { randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';
import { callTwin } from '../helpers/twinChild.ts';

/**
 * Journey: a producer prepares a transactional message and never calls commit or rollback; asked
 * back, it answers ROLLBACK. The model: that message is never delivered, and a commit after it is
 * refused. A second message, checked back with COMMIT and prepared after the first was settled,
 * is the control: once it is on the topic, the topic read to its end holds it and nothing else.
 * Judged from outside only: the check-back server's log of calls, the HTTP API and a Kafka
 * consumer reading every partition to its end.
 */
const topic = randomTopic('msgx.journey.rollback');

const checkCalls: string[] = [];
const check = useServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://check');
  checkCalls.push(`${url.pathname} ${url.searchParams.get('id')}`);
  const status = url.pathname === '/check/rollback' ? 'ROLLBACK' : 'COMMIT';
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status }));
});
const world = useJourney('rollback', {
  kafka: 'brokers',
  ownTopics: [{ topic, numPartitions: 2 }],
  env: () => ({ MSGX_TX_CHECK_ALLOWED_ORIGINS: check.origin, MSGX_TX_CHECK_INTERVAL: '200ms', MSGX_TX_CHECK_MAX: '3' }),
});

const call = (method: string, path: string, body?: unknown) => callTwin(world.twin, method, path, body);
const statusOf = async (id: string) => (await call('GET', `/v1/tx-messages/${id}`)).body.status;
const prepare = async (key: string, path: string) => {
  const p = await call('POST', '/v1/tx-messages', { topic, key, payload: { key }, checkUrl: `${check.origin}${path}`, checkAfterMs: 1 });
  expect(p).toMatchObject({ status: 201, body: { status: 'PREPARED' } });
  return String(p.body.id);
};

it('a check-back answered ROLLBACK: the message is never delivered, a later commit is refused', { timeout: 120_000 }, async () => {
  const rolledBack = await prepare('order-rolled-back', '/check/rollback');
  // Waits for the producer to have been asked, not for msgx's status: the topic is the judge.
  await waitFor(() => checkCalls.includes(`/check/rollback ${rolledBack}`), { timeoutMs: 30_000, what: 'the check-back call' });
  const control = await prepare('order-committed', '/check/commit');
  await waitFor(async () => (await statusOf(control)) === 'DELIVERED', { timeoutMs: 30_000, what: 'the control message delivered' });
  // The control was asked after the rolled-back one was answered, so anything that one would have
  // sent is on the topic by now too.
  const records = await readTopicToEnd(world.brokers, topic, { timeoutMs: 30_000 });
  expect(records.map((r) => [r.key, r.headers['msgx-txmsg-id']])).toEqual([['order-committed', control]]);
  expect(checkCalls.filter((c) => c.startsWith('/check/rollback'))).toEqual([`/check/rollback ${rolledBack}`]);
  expect(await statusOf(rolledBack)).toBe('ROLLED_BACK');
  expect(await call('POST', `/v1/tx-messages/${rolledBack}/commit`)).toMatchObject({ status: 409 });
});
