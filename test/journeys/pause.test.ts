import { describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { changesPerFlight, type Fields, FlightModel, fromKafka, useJourney } from '../helpers/journey.ts';
import { randomTopic, readTopicToEnd, type ReadRecord } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';
import { callTwin } from '../helpers/twinChild.ts';

/**
 * Pause from outside: the operator runs `msgx pause` and `msgx resume`, producers go on sending
 * over HTTP, a Kafka consumer reads what is delivered. The model: paused, what is sent is accepted
 * and waits (no flight changes), while a committed transactional message is still delivered;
 * resumed, the waiting message changes its flight. Breaking the pump's pause check makes the
 * flight change during the pause and the status show no backlog; making `msgx pause` a no-op
 * leaves the pipeline running and the same checks fail.
 */
const DAY = '20261202';
const FLID = 'P301';

const txTopic = randomTopic('msgx.pause.orders');
const model = new FlightModel();

const world = useJourney('pause', {
  mailbox: true,
  kafka: { partitions: 1 },
  ownTopics: [{ topic: txTopic }],
  // The check-back origin is never asked here: the message is committed long before it is due.
  env: () => ({ MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9' }),
});

const send = async (xml: string): Promise<number> => {
  const res = await fetch(`${world.twin.base}/cminmsgs/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/xml' },
    body: xml,
  });
  expect(res.status).toBe(200);
  return Number(await res.text());
};
const call = (method: string, path: string, body?: unknown) => callTwin(world.twin, method, path, body);

describe('pause from outside', () => {
  it('paused: sends are accepted and wait, delivery goes on; resumed: the waiting message is applied', async () => {
    const planned: Fields = { FLID, OPDY: DAY, AWCD: 'CZ', FLNO: '0301', STAT: 'SCH' };
    const planId = await send(schd('DNLD', { seqn: 'pplan', dttm: `${DAY}050000`, opdy: DAY, flights: [flight(planned)] }));
    model.set(FLID, { fields: planned, version: 1, msgIds: [planId] });
    await model.settled(world.twin.base, [FLID]);

    expect(await twinCli(world.twin.base, 'pause')).toMatch(
      /^pipeline paused: no head processing; ingress, delivery and check-backs go on/,
    );
    // The route the CLI called: pausing again changes nothing and says so.
    expect(await call('POST', '/admin/pause')).toMatchObject({ status: 200, body: { paused: true, changed: false } });
    expect(await (await fetch(`${world.twin.base}/health`)).json()).toMatchObject({ status: 'ok', pipeline: 'paused' });

    const change: Fields = { XREM: 'sent while paused' };
    const waiting = await send(flop('UPDT', { seqn: 'p1', dttm: `${DAY}060000` }, flight({ FLID, ...change })));

    // Delivery goes on: a transactional message committed now reaches its consumer.
    const tx = await call('POST', '/v1/tx-messages', {
      topic: txTopic,
      key: 'during-pause',
      payload: { n: 1 },
      checkUrl: 'http://127.0.0.1:9/never',
      checkAfterMs: 600_000,
    });
    expect(tx.status).toBe(201);
    expect((await call('POST', `/v1/tx-messages/${String(tx.body.id)}/commit`)).body).toMatchObject({ status: 'COMMITTED' });
    const delivered = await readWhen(txTopic, (rs) => rs.length >= 1);
    expect(delivered.map((r) => r.key)).toEqual(['during-pause']);

    // Head processing did not: the message sent during the pause is the head, its flight unchanged.
    const status = JSON.parse(await twinCli(world.twin.base, 'status', '--json')) as Record<string, unknown>;
    expect(status).toMatchObject({ paused: true, pipeline: { backlog: 1, head: { msgId: waiting } } });
    const read = await fetch(`${world.twin.base}/v1/flights/${FLID}`);
    expect(await read.json()).toMatchObject({ ...model.get(FLID)!.fields, stateVersion: 1 });

    expect(await twinCli(world.twin.base, 'resume')).toMatch(/^pipeline running/);
    model.apply(FLID, change, waiting);
    await model.settled(world.twin.base, [FLID]);
    expect(await (await fetch(`${world.twin.base}/v1/flights/${FLID}`)).json()).toMatchObject(model.get(FLID)!.fields);
    expect(await (await fetch(`${world.twin.base}/health`)).json()).toMatchObject({ pipeline: 'running' });
    // The consumer of flight changes sees both versions, in order, each made by the message the
    // model says (source.msgId in mailbox-ID order); a repeat is dropped by its event id.
    const versionsOf = (rs: ReadRecord[]) => changesPerFlight(rs.map(fromKafka)).get(FLID) ?? [];
    const changes = await readWhen(world.topics.msg, (rs) => versionsOf(rs).some((v) => v.version === 2));
    model.expectChanges('msgx.msg', changes.map(fromKafka), [FLID]);
  }, 300_000); // four CLI runs, each a cold Node start: minutes on a loaded two-core machine
});

/** The topic read to its end once what the test waits for is on it (the relay delivers a moment later). */
async function readWhen(topic: string, done: (records: ReadRecord[]) => boolean): Promise<ReadRecord[]> {
  let records: ReadRecord[] = [];
  await waitFor(async () => done((records = await readTopicToEnd(world.brokers, topic))), {
    timeoutMs: 60_000,
    intervalMs: 500,
    what: `the records awaited on ${topic}`,
  });
  return records;
}
