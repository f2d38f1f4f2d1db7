/**
 * What the journeys (test/journeys/) share: the world a journey drives from outside (a twin in a
 * child process on databases and Kafka topics of its own, servers playing the producer or a
 * webhook) and its judge (an independent model of the flights it sent, compared with what a real
 * consumer read). The model is built by hand from what the test sent; nothing here reads msgx's
 * tables.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, expect } from 'vitest';
import { createTopics, randomTopic, readTopicToEnd, type ReadRecord } from './kafka.ts';
import { freshMysql, freshPg, serviceUrls, type TestMysql, type TestPg, waitFor } from './services.ts';
import { callTwin, killTwins, startTwin, type Twin } from './twinChild.ts';

// ---- The world ----------------------------------------------------------------------------------

export interface JourneyWorld {
  /** The twin's own PostgreSQL database, unmigrated at the start (the twin migrates it, as a user's would be). */
  pg: TestPg;
  /** The mailbox (MariaDB), when the journey has one. */
  my: TestMysql;
  /** The running twin; start() replaces it (a restart on the same directory). */
  twin: Twin;
  /** The twin's working directory (its .msgx/ with the file sink lands there). */
  dir: string;
  brokers: string[];
  /** The flight topics of its own (MSGX_TOPIC_MSG, MSGX_TOPIC_SCHD), when it has brokers and flights. */
  topics: { msg: string; schd: string };
  /** The environment the twin was started with (without start()'s extras). */
  env: Record<string, string>;
  /** Starts a twin on the same databases and directory, with `more` on top of env. */
  start(more?: Record<string, string>): Promise<Twin>;
  /** One mailbox row per text, INSERTed in order as the upstream system does; their mailbox IDs. */
  insert(...texts: string[]): Promise<number[]>;
}

export interface JourneyOptions {
  /** A MariaDB mailbox of its own (MSGX_MAILBOX_URL, MSGX_TIMEZONE=UTC for the messages' times). */
  mailbox?: boolean;
  /**
   * { partitions }: the broker and msgx.msg / msgx.schd of its own with that many partitions;
   * 'brokers': the broker only (transactional messages and plain outbox rows name their own topics).
   */
  kafka?: { partitions: number } | 'brokers';
  /** Topics a consumer owns, created before the twin starts (msgx never creates them). */
  ownTopics?: { topic: string; numPartitions?: number }[];
  /** The journey's own settings, read once the servers it names are listening. */
  env?: () => Record<string, string>;
  /** false: the test starts the twin itself (world.start), e.g. twice with other settings. */
  startTwin?: boolean;
}

/**
 * The world of one journey file, made before its tests (beforeAll) and taken down after them
 * (afterAll): fresh databases, topics never used before (a reused topic would hold another run's
 * records and cursors), and the twin as `npm start` runs it. Servers the env names are started by
 * hooks registered before this call (useServer), so they listen before the twin asks them.
 */
export function useJourney(name: string, o: JourneyOptions = {}): JourneyWorld {
  const world = {} as JourneyWorld;
  beforeAll(async () => {
    world.pg = await freshPg({ migrate: false });
    if (o.mailbox) world.my = await freshMysql();
    world.brokers = serviceUrls().kafkaBrokers;
    world.topics = { msg: randomTopic(`msgx.${name}.msg`), schd: randomTopic(`msgx.${name}.schd`) };
    if (o.ownTopics) await createTopics(world.brokers, o.ownTopics);
    world.dir = mkdtempSync(join(tmpdir(), `msgx-journey-${name}-`));
    world.env = {
      MSGX_PG_URL: world.pg.url,
      ...(o.mailbox ? { MSGX_MAILBOX_URL: world.my.url, MSGX_TIMEZONE: 'UTC' } : {}),
      ...(o.kafka ? { MSGX_KAFKA_BROKERS: world.brokers.join(',') } : {}),
      ...(typeof o.kafka === 'object'
        ? { MSGX_TOPIC_MSG: world.topics.msg, MSGX_TOPIC_SCHD: world.topics.schd, MSGX_TOPIC_PARTITIONS: String(o.kafka.partitions) }
        : {}),
      // Deliveries a moment after the change, so a journey's waits are short.
      MSGX_DELIVERY_POLL_INTERVAL: '200ms',
      ...o.env?.(),
    };
    world.start = async (more = {}) => (world.twin = await startTwin({ ...world.env, ...more }, world.dir));
    world.insert = async (...texts) => {
      const c = await mysql.createConnection({ uri: world.my.url });
      try {
        const ids: number[] = [];
        for (const t of texts) ids.push(await insertOn(c, t));
        return ids;
      } finally {
        await c.end();
      }
    };
    if (o.startTwin !== false) await world.start();
  }, 180_000);
  afterAll(async () => {
    await world.twin?.stop('SIGTERM', { killAfterMs: 20_000 });
    killTwins();
    await world.my?.drop();
    await world.pg?.drop();
  });
  return world;
}

/** A mailbox row INSERTed on `c` (a connection of the test's, e.g. one holding a transaction open); its mailbox ID. */
export async function insertOn(c: mysql.Connection, text: string): Promise<number> {
  return (await c.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [text]))[0].insertId;
}

/**
 * A local HTTP server for the tests of the file (the producer's check-back endpoint, a webhook
 * receiver), listening before the hooks registered after this call run; closed after them.
 */
export function useServer(handler: RequestListener): { server: Server; origin: string } {
  const s = { server: createServer(handler), origin: '' };
  beforeAll(async () => {
    await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', () => r()));
    s.origin = `http://127.0.0.1:${(s.server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    // A server playing a hung producer holds its calls open: close them too, or close() never ends.
    s.server.closeAllConnections();
    s.server.close();
  });
  return s;
}

/**
 * A producer's check-back endpoint that accepts every call, reads it and never answers (its
 * service is hung), counting the calls it saw, holds open and saw closed: a journey judges from
 * these counts that msgx went on while the calls were still waiting.
 */
export function useHungProducer(): { readonly origin: string; seen: number; closed: number; open: Set<Socket> } {
  const hung = {
    seen: 0,
    closed: 0,
    open: new Set<Socket>(),
    // Known once the server listens (beforeAll).
    get origin() {
      return server.origin;
    },
  };
  const server = useServer((req) => {
    hung.seen++;
    hung.open.add(req.socket);
    req.socket.once('close', () => {
      hung.open.delete(req.socket);
      hung.closed++;
    });
  });
  return hung;
}

/**
 * `n` half messages on `topic` that nobody decides, their check-backs due at once and sent to the
 * hung producer with its full 60 s each: calls that stay open for the whole journey.
 */
export async function prepareForHungProducer(world: JourneyWorld, hung: { origin: string }, topic: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await callTwin(world.twin, 'POST', '/v1/tx-messages', {
      topic,
      payload: { order: i },
      checkUrl: `${hung.origin}/check`,
      checkAfterMs: 1,
      checkTimeoutMs: 60_000,
    });
    expect(res.status).toBe(201);
  }
}

// ---- The model ----------------------------------------------------------------------------------

export type Fields = Record<string, string | Record<string, string>[]>;

/**
 * A journey's independent model of its flights, built by the test by hand from what it sent
 * (never read back from msgx's tables): per FLID, the fields a reader must see, the state version
 * (one per message that changed it) and, where the test knows them, the mailbox IDs of those
 * messages in mailbox-ID order (the order msgx must apply them in).
 */
export class FlightModel extends Map<string, { fields: Fields; version: number; msgIds?: number[] }> {
  /** Flights the test deleted (FDEL): they read DELETED and their last msgx.schd record is a tombstone. */
  readonly deleted = new Set<string>();

  /** A message (mailbox ID `msgId`, when known) changed `flid`: its fields merge in and its version steps by one. */
  apply(flid: string, fields: Fields, msgId?: number): void {
    const m = this.get(flid)!;
    m.fields = { ...m.fields, ...fields };
    m.version++;
    if (msgId === undefined) delete m.msgIds;
    else if (m.msgIds) m.msgIds = [...m.msgIds, msgId].sort((a, b) => a - b);
  }

  /**
   * The `source.msgId` sequence msgx.msg must carry for `flid` (the mailbox IDs of the messages that
   * changed it, in ID order), or undefined when the test did not learn every ID.
   */
  expectedSources(flid: string): number[] | undefined {
    const m = this.get(flid)!;
    return m.msgIds && m.msgIds.length === m.version ? m.msgIds : undefined;
  }

  /** Waits until the twin's read API at `base` shows every modelled version (the roles work asynchronously). */
  async settled(base: string, flids: string[]): Promise<void> {
    await waitFor(
      async () => {
        for (const flid of flids) {
          const res = await fetch(`${base}/v1/flights/${flid}`);
          if (res.status !== 200 || ((await res.json()) as { stateVersion: number }).stateVersion !== this.get(flid)!.version) return false;
        }
        return true;
      },
      { timeoutMs: 60_000, what: 'the flights to reach their modelled versions' },
    );
  }

  /** The read API at `base` shows each flight's modelled fields and version (DELETED for a deleted one). */
  async expectReadApi(base: string, flids: string[]): Promise<void> {
    for (const flid of flids) {
      const want = this.get(flid)!;
      const res = await fetch(`${base}/v1/flights/${flid}`);
      expect(res.status, flid).toBe(200);
      expect(await res.json(), flid).toMatchObject({
        ...want.fields,
        stateVersion: want.version,
        ...(this.deleted.has(flid) ? { status: 'DELETED' } : {}),
      });
    }
  }

  /**
   * The change records (msgx.msg, or a webhook's FLIGHT_* posts) against the model: per flight,
   * versions 1..n in order (none lost, a repeat dropped by its event id) made by the messages the
   * model names, in mailbox-ID order; versions alone would pass two messages applied swapped.
   */
  expectChanges(where: string, records: EventRecord[], flids: string[]): void {
    const changes = changesPerFlight(records);
    for (const flid of flids) {
      const want = this.get(flid)!;
      expect(
        changes.get(flid)?.map((x) => x.version),
        `${where} ${flid}: versions`,
      ).toEqual(Array.from({ length: want.version }, (_, i) => i + 1));
      expect(
        changes.get(flid)?.map((x) => x.msgId),
        `${where} ${flid}: source.msgId in mailbox-ID order`,
      ).toEqual(this.expectedSources(flid));
    }
  }

  /** The state records (msgx.schd, or UPSERT posts): the last one per flight is the model, a tombstone for a deleted flight. */
  expectLastStates(where: string, records: EventRecord[], flids: string[]): void {
    const last = new Map<string, string | null>();
    for (const r of records) last.set(r.key!, r.value);
    for (const flid of flids) {
      const want = this.get(flid)!;
      if (this.deleted.has(flid)) expect(last.get(flid), `${where} ${flid}: a tombstone`).toBeNull();
      else expect(JSON.parse(last.get(flid) ?? 'null'), `${where} ${flid}`).toMatchObject({ ...want.fields, stateVersion: want.version });
    }
  }
}

// ---- The judge ----------------------------------------------------------------------------------

/** A delivered record as a consumer sees it, wherever it was read (Kafka, a webhook, the file sink). */
export interface EventRecord {
  eventId: string;
  key: string | null;
  value: string | null;
}

/** A Kafka record as an EventRecord: its event id is the msgx-event-id header. */
export const fromKafka = (r: ReadRecord): EventRecord => ({ eventId: r.headers['msgx-event-id']!, key: r.key, value: r.value });

/** What a consumer makes of change records: per flight, each event once (by event id), in order. */
export function changesPerFlight(records: EventRecord[]): Map<string, { version: number; msgId: number }[]> {
  const seen = new Set<string>();
  const out = new Map<string, { version: number; msgId: number }[]>();
  for (const r of records) {
    if (seen.has(r.eventId) || r.value === null) continue;
    seen.add(r.eventId);
    const v = JSON.parse(r.value) as { stateVersion: number; source: { msgId: number } };
    out.set(r.key!, [...(out.get(r.key!) ?? []), { version: v.stateVersion, msgId: v.source.msgId }]);
  }
  return out;
}

/**
 * Runs `judgement` until it passes or the time runs out, then once more so a failure reads as
 * the judgement's own: the relay delivers a moment after the flights changed.
 */
export async function eventually(judgement: () => Promise<void> | void, o: { timeoutMs: number; what: string }): Promise<void> {
  await waitFor(
    async () => {
      await judgement();
      return true;
    },
    { ...o, intervalMs: 500 },
  ).catch(() => {});
  await judgement();
}

/**
 * The model's flights wherever a reader sees them, now: the read API, msgx.msg and the last
 * msgx.schd record per flight, each topic read by a real consumer to the end of every partition.
 */
export async function checkFlightsOnKafka(world: JourneyWorld, model: FlightModel, flids: string[]): Promise<void> {
  await model.expectReadApi(world.twin.base, flids);
  model.expectChanges('msgx.msg', (await readTopicToEnd(world.brokers, world.topics.msg)).map(fromKafka), flids);
  model.expectLastStates('msgx.schd', (await readTopicToEnd(world.brokers, world.topics.schd)).map(fromKafka), flids);
}

/** checkFlightsOnKafka once the read API shows the modelled versions and the relay had time to deliver them. */
export async function judgeFlightsOnKafka(world: JourneyWorld, model: FlightModel, flids: string[]): Promise<void> {
  await model.settled(world.twin.base, flids);
  await eventually(() => checkFlightsOnKafka(world, model, flids), { timeoutMs: 30_000, what: 'the topics to show the modelled flights' });
}
