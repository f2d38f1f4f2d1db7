import mysql from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { fdel, flight, flop, schd } from '../fixtures/messages/build.ts';
import {
  changesPerFlight,
  checkFlightsOnKafka,
  type Fields,
  FlightModel,
  fromKafka,
  insertOn,
  judgeFlightsOnKafka,
  useJourney,
  useServer,
} from '../helpers/journey.ts';
import { readTopicToEnd } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';
import { twinCli } from '../helpers/twinCli.ts';

/**
 * Journeys of the things that go wrong around msgx, driven ONLY from outside (rows INSERTed into
 * the mailbox by "another system", its transactions left open, committed late or rolled back, the
 * CLI, SIGKILL of the twin) against one twin on real PostgreSQL, MariaDB and Kafka, with a webhook
 * fan-out beside Kafka. Judged by a model the test builds from what it sent: per flight the
 * fields, the version and the mailbox IDs of the messages that changed it, against the read API,
 * msgx.msg (versions 1..n and source.msgId in mailbox-ID order, duplicates dropped by event id),
 * the last msgx.schd record (a tombstone for a deleted flight) and the webhook's posts.
 */
const DAY = '20261129';

/** The fan-out receiver: every post it took, in arrival order. */
const posts: { eventId: string; type: string; key: string | null; value: string | null }[] = [];
/** While set, the receiver keeps each post in hand, unanswered (a delivery in flight). */
let holdPosts = false;
let inHand = 0;

const receiver = useServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'POST') {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        eventId: number | string;
        type: string;
        key: string | null;
        value: string | null;
      };
      posts.push({ eventId: String(body.eventId), type: body.type, key: body.key, value: body.value });
      if (holdPosts) {
        inHand++;
        return; // never answered: its sender dies with it in flight
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
});
const world = useJourney('resilience', {
  mailbox: true,
  kafka: { partitions: 2 },
  env: () => ({
    MSGX_FANOUT_WEBHOOKS: `${receiver.origin}/hooks`,
    MSGX_SIGNING_SECRET: 'resilience-journey-secret',
    // A held insert becomes a hole after 1 s; a row committed later is found by the re-check.
    MSGX_GAP_GRACE: '1s',
    // The SIGKILLed twin's leases are taken over because its process is gone, not waited out: a
    // restart that waited for them would miss every judgement.
    MSGX_DELIVERY_LEASE: '10m',
  }),
});

// ---- The independent model -----------------------------------------------------------------------

const model = new FlightModel();
const planned = (flid: string): Fields => ({ FLID: flid, OPDY: DAY, AWCD: 'CZ', FLNO: flid.slice(-4), STAT: 'SCH' });
const pad = (n: number) => String(n).padStart(2, '0');
let serial = 0;

/** A FLOP carrying a value never sent before (so it changes its flight exactly once). */
function nextFlop(flid: string, o: { sndr?: string; seqn?: string; styp?: 'ETOT' | 'UPDT' } = {}): { text: string; fields: Fields } {
  const i = ++serial;
  const styp = o.styp ?? (i % 2 === 0 ? 'UPDT' : 'ETOT');
  const fields: Fields =
    styp === 'UPDT' ? { XREM: `resilience remark ${i}` } : { ETOT: `${DAY}${pad(6 + (i % 12))}${pad(i % 60)}${pad(i % 59)}` };
  return { text: flop(styp, { seqn: o.seqn ?? `r${i}`, dttm: `${DAY}070000`, sndr: o.sndr }, flight({ FLID: flid, ...fields })), fields };
}

async function withMailbox<T>(fn: (c: mysql.Connection) => Promise<T>): Promise<T> {
  const c = await mysql.createConnection({ uri: world.my.url });
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A day plan for `flids`, INSERTed into the mailbox; the model starts each flight at v1. */
async function plan(flids: string[]): Promise<void> {
  const id = await withMailbox((c) =>
    insertOn(c, schd('DNLD', { seqn: `plan-${flids[0]}`, dttm: `${DAY}050000`, opdy: DAY, flights: flids.map((f) => flight(planned(f))) })),
  );
  for (const f of flids) model.set(f, { fields: planned(f), version: 1, msgIds: [id] });
}

const settled = (flids: string[]) => model.settled(world.twin.base, flids);
const checkFlights = (flids: string[]) => checkFlightsOnKafka(world, model, flids);
const judge = (flids: string[]) => judgeFlightsOnKafka(world, model, flids);

/** What the operator's stats say (GET /admin/stats, the API behind `msgx status`). */
const status = async () =>
  (await (await fetch(`${world.twin.base}/admin/stats`)).json()) as { paused: boolean; pipeline: { backlog: number } };

// ---- Journeys -----------------------------------------------------------------------------------

describe('resilience journeys from outside', () => {
  it('a message sent again is a duplicate and changes nothing; the same SEQN from another sender is a message of its own', async () => {
    await plan(['JD1', 'JD2']);
    // Same TYPE, STYP and SEQN; only the sender differs.
    const first = nextFlop('JD1', { seqn: 'dup-1', styp: 'UPDT' });
    const otherSender = nextFlop('JD1', { sndr: 'AODB', seqn: 'dup-1', styp: 'UPDT' });
    const after = nextFlop('JD1');
    const ids = await withMailbox(async (c) => {
      const a = await insertOn(c, first.text);
      const again = await insertOn(c, first.text); // upstream resends: same SNDR, TYPE, STYP, SEQN
      const b = await insertOn(c, otherSender.text);
      const d = await insertOn(c, after.text);
      return { a, again, b, d };
    });
    model.apply('JD1', first.fields, ids.a);
    model.apply('JD1', otherSender.fields, ids.b);
    model.apply('JD1', after.fields, ids.d);
    await judge(['JD1', 'JD2']);
    // The mailbox owner sees the resend back-filled as skipped, not applied.
    await waitFor(
      async () =>
        withMailbox(async (c) => {
          const [rows] = await c.query<mysql.RowDataPacket[]>('SELECT PROC_STATUS AS s FROM CMINMSGS WHERE ID = ?', [ids.again]);
          return rows[0]?.s === 'SKIPPED';
        }),
      { timeoutMs: 30_000, what: 'the resend back-filled SKIPPED' },
    );
  });

  it('inserts held open by another system: one committed late is applied, one rolled back leaves a hole the queue passes', async () => {
    await plan(['JL1', 'JL2', 'JL3']);
    const lateOne = nextFlop('JL1');
    const rolledBack = nextFlop('JL2');
    const held1 = await mysql.createConnection({ uri: world.my.url });
    const held2 = await mysql.createConnection({ uri: world.my.url });
    try {
      await held1.query('START TRANSACTION');
      const lateId = await insertOn(held1, lateOne.text);
      await held2.query('START TRANSACTION');
      await insertOn(held2, rolledBack.text);
      // Rows behind the two open inserts: msgx waits out the gaps, then gives them up as holes.
      const behind = [nextFlop('JL3'), nextFlop('JL3')];
      await withMailbox(async (c) => {
        for (const f of behind) model.apply('JL3', f.fields, await insertOn(c, f.text));
      });
      await settled(['JL3']);
      await held1.query('COMMIT');
      await held2.query('ROLLBACK');
      // Committed after msgx passed its ID: applied late, after the newer rows of another flight.
      model.apply('JL1', lateOne.fields, lateId);
      // The flight of the rolled-back row still changes by what comes next.
      const next = nextFlop('JL2');
      model.apply('JL2', next.fields, await withMailbox((c) => insertOn(c, next.text)));
    } finally {
      await held1.end().catch(() => {});
      await held2.end().catch(() => {});
    }
    await judge(['JL1', 'JL2', 'JL3']);
  });

  it('FDEL: the flight reads DELETED one version on, msgx.msg carries the deletion, msgx.schd ends with a tombstone', async () => {
    await plan(['JF1', 'JF2']);
    const change = nextFlop('JF1');
    await withMailbox(async (c) => {
      model.apply('JF1', change.fields, await insertOn(c, change.text));
      model.apply('JF1', {}, await insertOn(c, fdel({ seqn: 'fdel-1', dttm: `${DAY}090000` }, 'JF1')));
    });
    model.deleted.add('JF1');
    await judge(['JF1', 'JF2']);
    const types = (await readTopicToEnd(world.brokers, world.topics.msg))
      .filter((r) => r.key === 'JF1')
      .map((r) => r.headers['msgx-event-type']);
    expect(types.at(-1)).toBe('FLIGHT_DELETED');
  });

  it('pause and resume with traffic: nothing is applied while paused, everything in order after the resume', async () => {
    await plan(['JP1', 'JP2']);
    await settled(['JP1', 'JP2']);
    expect(await twinCli(world.twin.base, 'pause')).toMatch(/paused/);
    const changes = [nextFlop('JP1'), nextFlop('JP2'), nextFlop('JP1'), nextFlop('JP1')];
    const ids = await withMailbox(async (c) => {
      const out: number[] = [];
      for (const f of changes) out.push(await insertOn(c, f.text));
      return out;
    });
    // Taken in (ingress and poller go on) but not applied: the backlog holds all of them.
    await waitFor(async () => (await status()).pipeline.backlog === changes.length, {
      timeoutMs: 30_000,
      what: `a backlog of ${changes.length} while paused`,
    });
    expect((await status()).paused).toBe(true);
    await checkFlights(['JP1', 'JP2']); // still the plan's versions everywhere
    expect(await twinCli(world.twin.base, 'resume')).toMatch(/running/);
    changes.forEach((f, i) => model.apply(i === 1 ? 'JP2' : 'JP1', f.fields, ids[i]));
    await judge(['JP1', 'JP2']);
  });

  it('SIGKILL of the twin mid-journey, upstream writing on while it is down: after a restart nothing is lost or reordered', async () => {
    const flids = ['JK1', 'JK2', 'JK3', 'JK4'];
    await plan(flids);
    const write = (n: number) =>
      withMailbox(async (c) => {
        for (let i = 0; i < n; i++) {
          const flid = flids[i % flids.length]!;
          const f = nextFlop(flid);
          model.apply(flid, f.fields, await insertOn(c, f.text));
        }
      });
    // The webhook keeps the burst's deliveries in hand, so the kill finds events in flight too.
    holdPosts = true;
    await write(120);
    // Killed once it is working on them (some flight moved on) and a delivery of them is in flight.
    await waitFor(
      async () => {
        const r = await fetch(`${world.twin.base}/v1/flights/JK1`);
        return inHand > 0 && r.status === 200 && ((await r.json()) as { stateVersion: number }).stateVersion > 1;
      },
      { timeoutMs: 60_000, what: 'the twin to start on the burst, a delivery in flight' },
    );
    await world.twin.stop('SIGKILL');
    holdPosts = false;
    await write(40);
    await world.start();
    // The killed dispatcher's leases (10 minutes here) are taken over at once, its process being gone;
    // its open Kafka transaction is aborted when the restarted one's producer fences it.
    await judge(flids);
    // Exactly once into Kafka (on by default with brokers): a read_committed consumer sees each
    // event once across the kill (test/faults/relay-eos.test.ts kills inside the transaction itself).
    const ids = (await readTopicToEnd(world.brokers, world.topics.msg)).map((r) => r.headers['msgx-event-id']!);
    expect(
      ids.filter((id, i) => ids.indexOf(id) !== i),
      'msgx.msg event ids seen twice',
    ).toEqual([]);
  });

  it('fan-out: Kafka and the webhook received the same change events, per flight in the same order', async () => {
    const all = [...model.keys()];
    await judge(all);
    const kafka = (await readTopicToEnd(world.brokers, world.topics.msg)).map(fromKafka);
    const hooks = () => posts.filter((p) => p.type.startsWith('FLIGHT_'));
    await waitFor(() => new Set(hooks().map((p) => p.eventId)).size >= new Set(kafka.map((r) => r.eventId)).size, {
      timeoutMs: 30_000,
      what: 'the webhook to catch up with Kafka',
    });
    expect(new Set(hooks().map((p) => p.eventId))).toEqual(new Set(kafka.map((r) => r.eventId)));
    const atHook = changesPerFlight(hooks());
    for (const flid of all) expect(atHook.get(flid), `webhook ${flid}`).toEqual(changesPerFlight(kafka).get(flid));
  });
});
