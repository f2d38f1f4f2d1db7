import kafkajs from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { type Fields, FlightModel, judgeFlightsOnKafka, useJourney } from '../helpers/journey.ts';
import { readTopicToEnd } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';

/**
 * Replays an operator runs against a twin on real PostgreSQL, MariaDB and Kafka, driven only from
 * outside: rows INSERTed into the mailbox, a DBA's maintenance trigger on the flight store (an
 * outage msgx did not cause and an operator can end), the Kafka topic's own size limit lowered
 * and raised again with the Kafka admin API, and `bin/msgx.mjs dead` / `replay`. Judged by a model
 * of what the test sent, on the read API and on what a real consumer reads from msgx.msg and
 * msgx.schd to the end of every partition.
 */
const DAY = '20261129';
const { Kafka, logLevel } = kafkajs;

const world = useJourney('replay', {
  mailbox: true,
  kafka: { partitions: 2 },
  env: () => ({
    MSGX_DELIVERY_INITIAL_BACKOFF: '200ms',
    MSGX_DELIVERY_MAX_BACKOFF: '1s',
    MSGX_DELIVERY_MAX_RETRY_COUNT: '3',
    // A failing message dies after two attempts, so the head is not held for minutes.
    MSGX_MAX_ATTEMPTS: '2',
    MSGX_BACKOFF_INITIAL: '200ms',
    MSGX_BACKOFF_MAX: '1s',
  }),
});
const cli = (...args: string[]) => twinCli(world.twin.base, ...args);

// ---- The independent model -----------------------------------------------------------------------

const model = new FlightModel();
const planned = (flid: string): Fields => ({ FLID: flid, OPDY: DAY, AWCD: 'CZ', FLNO: flid.slice(-4), STAT: 'SCH' });
let serial = 0;

/** A FLOP setting a remark never sent before (so it changes its flight exactly once). */
function remark(flid: string, text = `replay remark ${++serial}`): { text: string; fields: Fields } {
  return {
    text: flop('UPDT', { seqn: `rp${++serial}`, dttm: `${DAY}070000` }, flight({ FLID: flid, XREM: text })),
    fields: { XREM: text },
  };
}

const insert = async (text: string) => (await world.insert(text))[0]!;

/** The read API, msgx.msg (versions 1..n, source.msgId in mailbox-ID order) and the last msgx.schd record hold the model. */
const judge = (flids: string[]) => judgeFlightsOnKafka(world, model, flids);

const deadOf = async (kind: 'proc' | 'event') =>
  ((await (await fetch(`${world.twin.base}/admin/dead?kind=${kind}`)).json()) as { items: Record<string, unknown>[] }).items;

async function topicConfig(name: string, value: string): Promise<void> {
  const admin = new Kafka({ clientId: 'msgx-test-operator', brokers: world.brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: 2 /* TOPIC */, name: world.topics.msg, configEntries: [{ name, value }] }],
    });
  } finally {
    await admin.disconnect();
  }
}

// ---- Journeys -----------------------------------------------------------------------------------

describe('replays from outside, judged on Kafka', () => {
  it('a message that died of an outage is replayed once the outage is over and then succeeds, applied once', async () => {
    const planId = await insert(
      schd('DNLD', { seqn: 'replay-plan', dttm: `${DAY}050000`, opdy: DAY, flights: ['JR1', 'JR2'].map((f) => flight(planned(f))) }),
    );
    for (const f of ['JR1', 'JR2']) model.set(f, { fields: planned(f), version: 1, msgIds: [planId] });
    await judge(['JR1', 'JR2']);

    // A DBA's maintenance: writes to JR1's row fail in the database, a cause that is not the message's.
    await world.pg.db.query(`CREATE FUNCTION journey_outage() RETURNS trigger LANGUAGE plpgsql AS $$
                       BEGIN RAISE EXCEPTION 'flight store unavailable (maintenance)'; END $$`);
    await world.pg.db.query(`CREATE TRIGGER journey_outage BEFORE INSERT OR UPDATE ON flight_schd FOR EACH ROW
                       WHEN (NEW.flid = 'JR1') EXECUTE FUNCTION journey_outage()`);
    const failing = remark('JR1');
    const failingId = await insert(failing.text);
    const behind = remark('JR2');
    model.apply('JR2', behind.fields, await insert(behind.text));
    // It dies after its attempts; the message behind it goes on (the head is not held forever).
    await waitFor(async () => (await deadOf('proc')).some((d) => Number(d.msg_id) === failingId && d.status === 'DEAD'), {
      timeoutMs: 60_000,
      what: 'the message to die',
    });
    await judge(['JR1', 'JR2']); // JR1 still the plan everywhere, JR2 one on
    expect(await cli('dead')).toMatch(new RegExp(`\\n${failingId}\\s.*EXHAUSTED`));

    // The outage ends; the operator replays it.
    await world.pg.db.query(`DROP TRIGGER journey_outage ON flight_schd`);
    expect(await cli('replay', '--kind', 'proc', '--ids', String(failingId))).toMatch(/^moved 1$/m);
    model.apply('JR1', failing.fields, failingId);
    await judge(['JR1', 'JR2']);
    expect((await deadOf('proc')).map((d) => Number(d.msg_id))).not.toContain(failingId);
    expect(JSON.parse(await cli('trace', String(failingId), '--json'))).toMatchObject({
      msgId: failingId,
      message: { status: 'SUCCEEDED' },
      flightChanges: [{ flid: 'JR1' }],
    });
  });

  it('an event Kafka refused dies, the events behind it go on; replayed, its record arrives once with the same msgx-event-id', async () => {
    // The topic refuses records over 4 KiB (the broker says MESSAGE_TOO_LARGE); the flights' usual records are far smaller.
    await topicConfig('max.message.bytes', '4096');
    const big = remark('JR2', `replay remark ${'x'.repeat(8_000)}`);
    const bigId = await insert(big.text);
    model.apply('JR2', big.fields, bigId);
    await model.settled(world.twin.base, ['JR2']);
    const deadEvent = await waitFor(
      async () => (await deadOf('event')).find((d) => d.key === 'JR2' && d.target === 'msg') as { eventId: number } | undefined,
      { timeoutMs: 60_000, what: 'the refused event to die' },
    );
    const deadId = String(deadEvent.eventId);
    // The CLI lists it (its first column is the event id).
    expect((await cli('dead', '--kind', 'event')).split('\n').some((l) => l.trim().split(/\s+/)[0] === deadId)).toBe(true);
    // Behind it, another flight's change goes out.
    const after = remark('JR1');
    const afterId = await insert(after.text);
    model.apply('JR1', after.fields, afterId);
    await waitFor(
      async () =>
        (await readTopicToEnd(world.brokers, world.topics.msg)).some(
          (r) => r.value !== null && JSON.parse(r.value).source?.msgId === afterId,
        ),
      { timeoutMs: 60_000, what: 'the change behind the dead event on msgx.msg' },
    );
    expect((await readTopicToEnd(world.brokers, world.topics.msg)).filter((r) => r.headers['msgx-event-id'] === deadId)).toEqual([]);

    // The operator raises the limit again, looks first, then replays that event.
    await topicConfig('max.message.bytes', String(2 * 1024 * 1024));
    expect(await cli('replay', '--kind', 'event', '--ids', deadId, '--dry-run')).toMatch(/^would move 1$/m);
    expect((await readTopicToEnd(world.brokers, world.topics.msg)).filter((r) => r.headers['msgx-event-id'] === deadId)).toEqual([]);
    expect(await cli('replay', '--kind', 'event', '--ids', deadId)).toMatch(/^moved 1$/m);
    await waitFor(async () => (await readTopicToEnd(world.brokers, world.topics.msg)).some((r) => r.headers['msgx-event-id'] === deadId), {
      timeoutMs: 60_000,
      what: 'the replayed event on msgx.msg',
    });
    const again = (await readTopicToEnd(world.brokers, world.topics.msg)).filter((r) => r.headers['msgx-event-id'] === deadId);
    expect(again, 'the replayed record, once').toHaveLength(1);
    expect(again[0]!.key).toBe('JR2');
    expect(JSON.parse(again[0]!.value!)).toMatchObject({ stateVersion: model.get('JR2')!.version, source: { msgId: bigId } });
    await judge(['JR1', 'JR2']);
    expect((await deadOf('event')).map((d) => String(d.eventId))).not.toContain(deadId);
  });
});
