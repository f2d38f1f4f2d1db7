import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { FlightModel, type Fields } from '../helpers/flightModel.ts';
import { createTopics, randomTopic, readTopicToEnd, type ReadRecord } from '../helpers/kafka.ts';
import { freshMysql, freshPg, serviceUrls, type TestMysql, type TestPg, waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';
import { killTwins, startTwin, type Twin } from '../helpers/twinChild.ts';

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

let pg: TestPg;
let my: TestMysql;
let twin: Twin;
let brokers: string[];
const txTopic = randomTopic('msgx.pause.orders');
const topicMsg = randomTopic('msgx.pause.msg');
const model = new FlightModel();

beforeAll(async () => {
  pg = await freshPg({ migrate: false });
  my = await freshMysql();
  brokers = serviceUrls().kafkaBrokers;
  await createTopics(brokers, [{ topic: txTopic }]);
  twin = await startTwin(
    {
      MSGX_PG_URL: pg.url,
      MSGX_MAILBOX_URL: my.url,
      MSGX_KAFKA_BROKERS: brokers.join(','),
      MSGX_TOPIC_MSG: topicMsg,
      MSGX_TOPIC_SCHD: randomTopic('msgx.pause.schd'),
      MSGX_TOPIC_PARTITIONS: '1',
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
      MSGX_TIMEZONE: 'UTC',
      // The check-back origin is never asked here: the message is committed long before it is due.
      MSGX_TX_CHECK_ALLOWED_ORIGINS: 'http://127.0.0.1:9',
    },
    mkdtempSync(join(tmpdir(), 'msgx-pause-')),
  );
}, 120_000);
afterAll(async () => {
  await twin?.stop('SIGTERM');
  killTwins();
  await my?.drop();
  await pg?.drop();
});

const send = async (xml: string): Promise<number> => {
  const res = await fetch(`${twin.base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: xml });
  expect(res.status).toBe(200);
  return Number(await res.text());
};
const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${twin.base}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('pause from outside', () => {
  it('paused: sends are accepted and wait, delivery goes on; resumed: the waiting message is applied', async () => {
    const planned: Fields = { FLID, OPDY: DAY, AWCD: 'CZ', FLNO: '0301', STAT: 'SCH' };
    const planId = await send(schd('DNLD', { seqn: 'pplan', dttm: `${DAY}050000`, opdy: DAY, flights: [flight(planned)] }));
    model.set(FLID, { fields: planned, version: 1, msgIds: [planId] });
    await model.settled(twin.base, [FLID]);

    expect(await twinCli(twin.base, 'pause')).toMatch(/^pipeline paused: no head processing; ingress, delivery and check-backs go on/);
    // The route the CLI called: pausing again changes nothing and says so.
    expect(await call('POST', '/admin/pause')).toMatchObject({ status: 200, body: { paused: true, changed: false } });
    expect(await (await fetch(`${twin.base}/health`)).json()).toMatchObject({ status: 'ok', pipeline: 'paused' });

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
    const status = JSON.parse(await twinCli(twin.base, 'status', '--json')) as Record<string, unknown>;
    expect(status).toMatchObject({ paused: true, pipeline: { backlog: 1, head: { msgId: waiting } } });
    const read = await fetch(`${twin.base}/v1/flights/${FLID}`);
    expect(await read.json()).toMatchObject({ ...model.get(FLID)!.fields, stateVersion: 1 });

    expect(await twinCli(twin.base, 'resume')).toMatch(/^pipeline running/);
    model.apply(FLID, change, waiting);
    await model.settled(twin.base, [FLID]);
    expect(await (await fetch(`${twin.base}/v1/flights/${FLID}`)).json()).toMatchObject(model.get(FLID)!.fields);
    expect(await (await fetch(`${twin.base}/health`)).json()).toMatchObject({ pipeline: 'running' });
    // The consumer of flight changes sees both versions, in order, each made by the message the
    // model says (source.msgId in mailbox-ID order); a repeat is dropped by its event id.
    const onceEach = (rs: ReadRecord[]) => {
      const seen = new Set<string>();
      return rs
        .filter((r) => !seen.has(r.headers['msgx-event-id']!) && seen.add(r.headers['msgx-event-id']!))
        .map((r) => JSON.parse(r.value!) as { stateVersion: number; source: { msgId: number } });
    };
    const changes = onceEach(await readWhen(topicMsg, (rs) => onceEach(rs).some((v) => v.stateVersion === 2)));
    expect(changes.map((v) => v.stateVersion)).toEqual([1, 2]);
    expect(
      changes.map((v) => v.source.msgId),
      'source.msgId in mailbox-ID order',
    ).toEqual(model.expectedSources(FLID));
  }, 300_000); // four CLI runs, each a cold Node start: minutes on a loaded two-core machine
});

/** The topic read to its end once what the test waits for is on it (the relay delivers a moment later). */
async function readWhen(topic: string, done: (records: ReadRecord[]) => boolean): Promise<ReadRecord[]> {
  let records: ReadRecord[] = [];
  await waitFor(async () => done((records = await readTopicToEnd(brokers, topic))), {
    timeoutMs: 60_000,
    intervalMs: 500,
    what: `the records awaited on ${topic}`,
  });
  return records;
}
