import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { type Fields, FlightModel, insertOn, judgeFlightsOnKafka, useJourney, useServer } from '../helpers/journey.ts';
import { randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';
import { callTwin } from '../helpers/twinChild.ts';

/**
 * Journeys: msgx driven ONLY from outside, as its users drive it — rows INSERTed into the mailbox
 * table by "another system", HTTP, a real Kafka consumer on the topics, the CLI (`bin/msgx.mjs`)
 * — against the twin on real PostgreSQL, MariaDB and Kafka. Each journey is judged by a model the
 * test builds by hand from what it sent (never by reading msgx's own tables back).
 */
const DAY = '20261129';

const txTopic = randomTopic('msgx.journey.orders');
const txTopic2 = randomTopic('msgx.journey.points');

/**
 * The producer's check-back endpoint, as a user's service would run it: /check/commit always
 * answers COMMIT; /check/later answers UNKNOWN until `committedLater` is set.
 */
let committedLater = false;
const checkCalls: string[] = [];
const check = useServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://check');
  // msgx names the message twice: ?id= and the msgx-txmsg-id header; both must agree.
  const id = url.searchParams.get('id');
  checkCalls.push(`${url.pathname} ${id === req.headers['msgx-txmsg-id'] ? id : `mismatch ${id}/${String(req.headers['msgx-txmsg-id'])}`}`);
  const status = url.pathname === '/check/commit' || (url.pathname === '/check/later' && committedLater) ? 'COMMIT' : 'UNKNOWN';
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status }));
});
const world = useJourney('exchange', {
  mailbox: true,
  kafka: { partitions: 2 },
  // The consumer's own topic for transactional messages exists before anyone writes to it.
  ownTopics: [{ topic: txTopic }, { topic: txTopic2 }],
  env: () => ({
    MSGX_TX_CHECK_ALLOWED_ORIGINS: check.origin,
    MSGX_TX_CHECK_INTERVAL: '1s',
    MSGX_TX_CHECK_MAX: '2',
  }),
});

// ---- The independent model of the flight journeys ----------------------------------------------

const model = new FlightModel();
const planned = (flid: string): Fields => ({ FLID: flid, OPDY: DAY, AWCD: 'CZ', FLNO: flid.slice(-4), STAT: 'SCH' });
const pad = (n: number) => String(n).padStart(2, '0');

/** Every FLOP carries a value never sent before, so each one changes its flight exactly once. */
function nextFlop(i: number, flid: string): { text: string; fields: Fields } {
  const t = `${DAY}${pad(8 + (i % 10))}${pad(i % 60)}00`;
  const kind = i % 3;
  const fields: Fields =
    kind === 0 ? { ETOT: t } : kind === 1 ? { XREM: `journey remark ${i}` } : { GATE: [{ CODE: `J${i}`, BEG: t, END: '' }] };
  const styp = kind === 0 ? 'ETOT' : kind === 1 ? 'UPDT' : 'GATE';
  return { text: flop(styp, { seqn: `j${i}`, dttm: t }, flight({ FLID: flid, ...fields })), fields };
}

/**
 * What a reader must see of each modelled flight: the read API, msgx.msg and the last msgx.schd
 * record, once the relay delivered them.
 */
const judgeFlights = (flids: string[]) => judgeFlightsOnKafka(world, model, flids);
const settled = (flids: string[]) => model.settled(world.twin.base, flids);
const call = (method: string, path: string, body?: unknown) => callTwin(world.twin, method, path, body);

// ---- Journeys -----------------------------------------------------------------------------------

describe('journeys from outside', () => {
  const mailboxFlids = ['J101', 'J102', 'J103'];
  const httpFlids = ['J201', 'J202'];

  it('inbox pipeline: a day plan and FLOPs INSERTed into the mailbox end up in the read API and on both topics, in order', async () => {
    const c = await mysql.createConnection({ uri: world.my.url });
    try {
      const plan = schd('DNLD', {
        seqn: 'jplan',
        dttm: `${DAY}050000`,
        opdy: DAY,
        flights: [...mailboxFlids, ...httpFlids].map((f) => flight(planned(f))),
      });
      const insert = (text: string) => insertOn(c, text);
      const planId = await insert(plan);
      for (const f of [...mailboxFlids, ...httpFlids]) model.set(f, { fields: planned(f), version: 1, msgIds: [planId] });
      for (let i = 0; i < 12; i++) {
        const flid = mailboxFlids[i % mailboxFlids.length]!;
        const { text, fields } = nextFlop(i, flid);
        model.apply(flid, fields, await insert(text));
      }
      await judgeFlights(mailboxFlids);
      // The owner of the mailbox sees every row marked processed, successfully.
      await waitFor(
        async () => {
          const [rows] = await c.query<mysql.RowDataPacket[]>(
            `SELECT COUNT(*) AS n FROM CMINMSGS WHERE PROC_STATUS = 'SUCCEEDED' AND DATE_PROCESSED IS NOT NULL`,
          );
          return Number(rows[0]!.n) === 13;
        },
        { timeoutMs: 30_000, what: 'the mailbox back-fill' },
      );
    } finally {
      await c.end();
    }
  });

  it('ingress over HTTP: accepted FLOPs change their flights; refused input changes nothing and says why', async () => {
    const post = (body: string, type = 'application/xml') =>
      fetch(`${world.twin.base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': type }, body });
    for (let i = 100; i < 106; i++) {
      const flid = httpFlids[i % httpFlids.length]!;
      const { text, fields } = nextFlop(i, flid);
      const res = await post(text);
      expect(res.status).toBe(200);
      const id = Number(await res.text());
      expect(id).toBeGreaterThan(0);
      model.apply(flid, fields, id);
    }
    const bad = await post('<MSG><META></MSG>');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { detail: string }).detail).toMatch(/not well-formed/);
    const json = await post(nextFlop(999, 'J201').text, 'application/json');
    expect(json.status).toBe(415);
    await judgeFlights(httpFlids);
  });

  it('CLI: status and trace over the twin show what the user sent', async () => {
    const res = await fetch(`${world.twin.base}/cminmsgs/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/xml' },
      body: nextFlop(200, 'J101').text,
    });
    const id = Number(await res.text());
    model.apply('J101', nextFlop(200, 'J101').fields, id);
    await settled(['J101']);
    // The summary a person reads: the message, then its flight change and the events as tables.
    const trace = await twinCli(world.twin.base, 'trace', String(id));
    expect(trace).toMatch(new RegExp(`^message #${id} {2}FLOP/\\S+ {2}SUCCEEDED`));
    expect(trace).toMatch(/\nFLIGHT CHANGES\nflid .*state_version[^\n]*\n[- ]+\nJ101 /);
    expect(trace).toMatch(/\nEVENTS\nevent .*publishers/);
    expect(trace.split('\n').filter((l) => l.length > 120)).toEqual([]);
    // --json keeps the whole trace for scripts.
    const json = JSON.parse(await twinCli(world.twin.base, 'trace', String(id), '--json'));
    expect(json).toMatchObject({ msgId: id, message: { status: 'SUCCEEDED' }, flightChanges: [{ flid: 'J101' }] });
    // Every mailbox ID so far was committed in turn (nothing held open, nothing rolled back): no
    // gap, no hole, no late row, and the frontier at this message, the newest.
    expect(await twinCli(world.twin.base, 'status')).toMatch(
      new RegExp(
        `\\nORDERING \\(.*\\)\\ngaps waiting +0\\nholes +0 declared, 0 still open \\(never filled\\)\\nlate rows +0\\nfrontier +accounted ${id}, scanned ${id}\\n`,
      ),
    );
    const status = await twinCli(world.twin.base, 'status', '--json');
    // The model: the plan plus one message per version step of every flight, all SUCCEEDED.
    const sent = 1 + [...model.values()].reduce((n, m) => n + m.version - 1, 0);
    expect(JSON.parse(status)).toMatchObject({ paused: false, pipeline: { backlog: 0, head: null, byStatus: { SUCCEEDED: sent } } });
  });

  it('transactional messages: prepared is not delivered, committed is delivered to the consumer, ack makes it CONSUMED, rollback never arrives', async () => {
    const prepareBody = (n: number) => ({
      topic: txTopic,
      key: `order-${n}`,
      payload: { order: n },
      checkUrl: `${check.origin}/check/never`,
      checkAfterMs: 600_000,
    });
    const a = await call('POST', '/v1/tx-messages', prepareBody(1));
    expect(a).toMatchObject({ status: 201, body: { status: 'PREPARED' } });
    const b = await call('POST', '/v1/tx-messages', prepareBody(2));
    expect(b.status).toBe(201);
    expect((await call('POST', `/v1/tx-messages/${b.body.id}/rollback`)).body).toMatchObject({ status: 'ROLLED_BACK' });
    expect((await call('POST', `/v1/tx-messages/${a.body.id}/commit`)).body).toMatchObject({ status: 'COMMITTED' });
    // The consumer: the committed message arrives with its key and payload.
    const delivered = await waitFor(
      async () => {
        const r = await readTopicToEnd(world.brokers, txTopic, { timeoutMs: 10_000 });
        return r.length > 0 ? r : null;
      },
      { timeoutMs: 30_000, what: 'the committed message on the consumer topic' },
    );
    expect(delivered.map((r) => [r.key, JSON.parse(r.value!)])).toEqual([['order-1', { order: 1 }]]);
    await waitFor(async () => (await call('GET', `/v1/tx-messages/${a.body.id}`)).body.status === 'DELIVERED', { what: 'DELIVERED' });
    expect((await call('POST', `/v1/tx-messages/${a.body.id}/ack`)).body).toMatchObject({ status: 'CONSUMED' });
    expect((await call('GET', `/v1/tx-messages/${b.body.id}`)).body).toMatchObject({ status: 'ROLLED_BACK' });
    // Nothing else ever reached the topic (read to its end again).
    expect((await readTopicToEnd(world.brokers, txTopic)).map((r) => r.key)).toEqual(['order-1']);
  });

  const statusOf = async (id: unknown) => (await call('GET', `/v1/tx-messages/${String(id)}`)).body.status;

  it('transactional check-back: a producer that never commits is asked, and its COMMIT answer delivers the message', async () => {
    const p = await call('POST', '/v1/tx-messages', {
      topic: txTopic2,
      key: 'points-1',
      payload: { points: 10 },
      checkUrl: `${check.origin}/check/commit`,
      checkAfterMs: 1,
    });
    expect(p).toMatchObject({ status: 201, body: { status: 'PREPARED' } });
    await waitFor(async () => (await statusOf(p.body.id)) === 'DELIVERED', {
      timeoutMs: 30_000,
      what: 'the checked-back message to be delivered',
    });
    expect(checkCalls).toContain(`/check/commit ${String(p.body.id)}`);
    const records = await readTopicToEnd(world.brokers, txTopic2);
    expect(records.map((r) => [r.key, JSON.parse(r.value!)])).toEqual([['points-1', { points: 10 }]]);
    expect(records[0]!.headers['msgx-txmsg-id']).toBe(String(p.body.id));
  });

  it('transactional dead letter: unanswered check-backs make it DEAD, an operator resend after the producer committed delivers it once', async () => {
    const p = await call('POST', '/v1/tx-messages', {
      topic: txTopic2,
      key: 'points-2',
      payload: { points: 20 },
      checkUrl: `${check.origin}/check/later`,
      checkAfterMs: 1,
    });
    expect(p.status).toBe(201);
    // MSGX_TX_CHECK_MAX=2 answers of UNKNOWN: nobody knows whether the producer committed.
    await waitFor(async () => (await statusOf(p.body.id)) === 'DEAD', {
      timeoutMs: 30_000,
      what: 'the message to die after its check-backs',
    });
    // Exactly MSGX_TX_CHECK_MAX check-backs, every one naming the message the same way twice.
    expect(checkCalls.filter((c) => c.endsWith(` ${String(p.body.id)}`))).toEqual([
      `/check/later ${String(p.body.id)}`,
      `/check/later ${String(p.body.id)}`,
    ]);
    committedLater = true;
    // The operator's view of it: one row within 120 columns naming where it died.
    const deadTable = await twinCli(world.twin.base, 'dead', '--kind', 'txmsg');
    // Its row: id, topic (cut to fit), phase, checks (MSGX_TX_CHECK_MAX), tries (never delivered).
    expect(deadTable).toMatch(new RegExp(`\\n${String(p.body.id)} +msgx\\.journe\\S* +check +2 +0 `));
    expect(deadTable.split('\n').filter((l) => l.length > 120)).toEqual([]);
    const resent = await call('POST', `/admin/tx-messages/${String(p.body.id)}/resend`);
    expect(resent.status).toBe(200);
    await waitFor(async () => (await statusOf(p.body.id)) === 'DELIVERED', {
      timeoutMs: 30_000,
      what: 'the resent message to be delivered',
    });
    const records = await readTopicToEnd(world.brokers, txTopic2);
    expect(records.map((r) => r.key)).toEqual(['points-1', 'points-2']);
    expect(JSON.parse(records[1]!.value!)).toEqual({ points: 20 });
    // Its trace from the CLI: the message, its timeline with the resend, its event on Kafka.
    const trace = await twinCli(world.twin.base, 'trace', '--tx', String(p.body.id));
    expect(trace).toMatch(new RegExp(`^transactional message ${String(p.body.id)} {2}${txTopic2.replaceAll('.', '\\.')} {2}DELIVERED`));
    expect(trace).toMatch(/\nTIMELINE\n[\s\S]* resend /);
    // The log relay records no per-publisher partition/offset (a cursor per target, not a row per
    // delivery): the event is listed with the state its target's cursor gives it.
    expect(trace).toMatch(/\nEVENTS\n[\s\S]* SENT /);
    expect(trace.split('\n').filter((l) => l.length > 120)).toEqual([]);
    expect(JSON.parse(await twinCli(world.twin.base, 'trace', '--tx', String(p.body.id), '--json'))).toMatchObject({
      message: { id: p.body.id },
    });
  });

  it('requests: request-day from the CLI writes an RQFD to COUTMSGS; the upstream answer in the mailbox creates the flights', async () => {
    const day = '20261201';
    const out = await twinCli(world.twin.base, 'request-day', day);
    const id = /^id\s+(\S+)$/m.exec(out)?.[1];
    expect(id, out).toBeTruthy();
    const c = await mysql.createConnection({ uri: world.my.url });
    try {
      // What upstream reads: one RQFD for that day, naming the request.
      const [rows] = await c.query<mysql.RowDataPacket[]>('SELECT MSG_TEXT FROM COUTMSGS');
      const rqfd = rows.map((r) => String(r.MSG_TEXT)).filter((t) => t.includes('<TYPE>RQFD</TYPE>'));
      expect(rqfd).toHaveLength(1);
      expect(rqfd[0]).toContain(`<OPDY>${day}</OPDY>`);
      expect(rqfd[0]).toContain(`<SEQN>${id}</SEQN>`);
      // Upstream answers with the day's flights (sent after the request, in the twin's zone, UTC).
      const now = new Date(Date.now() + 60_000).toISOString().replace(/\D/g, '').slice(0, 14);
      const answered = ['J301', 'J302'];
      const answer = schd('RESP', {
        seqn: `resp-${id}`,
        dttm: now,
        opdy: day,
        flights: answered.map((f) => flight({ ...planned(f), OPDY: day })),
      });
      const answerId = await insertOn(c, answer);
      for (const f of answered) model.set(f, { fields: { ...planned(f), OPDY: day }, version: 1, msgIds: [answerId] });
      await judgeFlights(answered);
    } finally {
      await c.end();
    }
  });

  // Last: it holds the head for a while (a message msgx cannot process blocks the FIFO until it dies).
  it('replay: an unprocessable message holds the head, dies EXHAUSTED, then the queue moves on; the operator replays it from the CLI', async () => {
    const cli = (...args: string[]) => twinCli(world.twin.base, ...args);
    const post = async (text: string) =>
      Number(
        await (
          await fetch(`${world.twin.base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: text })
        ).text(),
      );
    const blocker = await post(
      flop('WXYZ', { seqn: 'j-unsupported', dttm: `${DAY}120000` }, flight({ FLID: 'J102', ETOT: `${DAY}120000` })),
    );
    const behind = nextFlop(300, 'J201');
    const behindId = await post(behind.text);
    // While the unsupported message heads the queue, the one behind it is not applied (FIFO).
    await waitFor(async () => JSON.parse(await cli('status', '--json')).pipeline.head?.msgId === blocker, {
      timeoutMs: 30_000,
      what: 'the blocker at the head',
    });
    // It dies after its attempts (EXHAUSTED), and the queue moves on.
    model.apply('J201', behind.fields, behindId);
    await settled(['J201']);
    await judgeFlights(['J201', 'J102']);
    // FIFO, judged by what happened rather than by a look at one moment: the message behind was
    // first tried only once the blocker had finished dying (their traces, one clock).
    const traceOf = async (id: number) =>
      JSON.parse(await cli('trace', String(id), '--json')) as {
        message: { status: string; errorClass: string; finishedAt: string };
        attempts: { startedAt: string }[];
      };
    const [blockerTrace, behindTrace] = [await traceOf(blocker), await traceOf(behindId)];
    expect(blockerTrace.message).toMatchObject({ status: 'DEAD', errorClass: 'EXHAUSTED' });
    expect(behindTrace.attempts.length, 'the message behind was tried').toBeGreaterThan(0);
    for (const a of behindTrace.attempts)
      expect(
        Date.parse(a.startedAt),
        `attempt at ${a.startedAt} after the blocker died at ${blockerTrace.message.finishedAt}`,
      ).toBeGreaterThanOrEqual(Date.parse(blockerTrace.message.finishedAt));
    const dead = await cli('dead');
    expect(dead).toContain(String(blocker));
    expect(dead).toMatch(/EXHAUSTED/);
    // The operator's replay says what would move and warns that a newer message already succeeded.
    const dry = await cli('replay', '--kind', 'proc', '--ids', String(blocker), '--dry-run');
    expect(dry).toMatch(/^would move 1$/m);
    expect(dry).toMatch(/1 newer message\(s\) already succeeded/);
    expect(behindId).toBeGreaterThan(blocker);
    const moved = await cli('replay', '--kind', 'proc', '--ids', String(blocker));
    expect(moved).toMatch(/^moved 1$/m);
    await waitFor(async () => JSON.parse(await cli('status', '--json')).pipeline.head?.msgId === blocker, {
      timeoutMs: 30_000,
      what: 'the replayed message back at the head',
    });
  });
});
