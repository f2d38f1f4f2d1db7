import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { freshMysql, freshPg, serviceUrls, waitFor } from '../helpers/services.ts';
import { killTwins, spawnTwin, startTwin } from '../helpers/twinChild.ts';

/**
 * The twin as a user runs it: `npm start` in a fresh directory. Embedded defaults (PGlite, mailbox
 * tables in it, file sink), then the same with real PostgreSQL, MariaDB and Kafka. SIGTERM ends it
 * promptly.
 */
afterAll(killTwins);
const run = promisify(execFile);

const post = (base: string, xml: string) =>
  fetch(`${base}/cminmsgs/send`, { method: 'POST', headers: { 'content-type': 'application/xml' }, body: xml });

const dayPlan = schd('DNLD', {
  seqn: 1,
  dttm: '20261129080000',
  opdy: '20261129',
  flights: [
    flight({
      FLID: '1001',
      OPDY: '20261129',
      AWCD: 'CZ',
      FLNO: '3101',
      GATE: [{ CODE: 'B12', BEG: '20261129093000', END: '20261129101500' }],
    }),
  ],
});
const gateChange = flop(
  'GATE',
  { seqn: 2, dttm: '20261129090000' },
  flight({ FLID: '1001', GATE: [{ CODE: 'B14', BEG: '20261129093000', END: '20261129101500' }] }),
);

/** A last message of the same flight: once its record is on a topic, everything before it is too. */
const control = flop('UPDT', { seqn: 3, dttm: '20261129091000' }, flight({ FLID: '1001', XREM: 'control' }));

describe('the twin (npm start)', () => {
  it('on embedded defaults: answers /health and processes a posted FLOP end to end to the file sink', { timeout: 300_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'msgx-twin-'));
    const twin = await startTwin({}, dir);
    const health = (await (await fetch(`${twin.base}/health`)).json()) as { status: string; checks: Record<string, string> };
    expect(health).toEqual({ status: 'ok', checks: { database: 'ok', migrations: 'ok', mailbox: 'ok' }, pipeline: 'running' });
    expect((await post(twin.base, dayPlan)).status).toBe(200);
    const id = Number(await (await post(twin.base, gateChange)).text());
    expect(id).toBeGreaterThan(1);

    const file = join(dir, '.msgx', 'events', 'msgx.msg.jsonl');
    const lines = await waitFor(
      () => {
        if (!existsSync(file)) return null;
        const l = readFileSync(file, 'utf8')
          .trim()
          .split('\n')
          .map((x) => JSON.parse(x));
        return l.length >= 2 ? l : null;
      },
      { timeoutMs: 20_000, what: 'two msgx.msg events in the file sink' },
    );
    expect(lines[1]).toMatchObject({ topic: 'msgx.msg', key: '1001', headers: { 'msgx-event-type': 'FLIGHT_UPDATED' } });
    const value = JSON.parse(lines[1].value);
    expect(value).toMatchObject({ v: 1, stateVersion: 2, flight: { GATE: [{ CODE: 'B14' }] }, source: { msgId: id } });

    const f = (await (await fetch(`${twin.base}/v1/flights/1001`)).json()) as { stateVersion: number };
    expect(f.stateVersion).toBe(2);

    // `npx msgx pause` / `resume` against the twin say what they did and nothing else: the twin has
    // no EventBridge schedules, so no AWS client is made (on node 20 one printed a 10-line SDK
    // support warning on stderr).
    for (const [cmd, paused] of [
      ['pause', true],
      ['resume', false],
    ] as const) {
      const r = await run(process.execPath, ['bin/msgx.mjs', cmd], { env: { ...process.env, MSGX_PG_URL: '', MSGX_TWIN_URL: twin.base } });
      expect(r.stdout).toBe(
        `pipeline ${paused ? 'paused: no head processing; ingress, delivery and check-backs go on' : 'running'} (twin at ${twin.base})\n`,
      );
      expect(r.stderr).toBe('');
      const stats = (await (await fetch(`${twin.base}/admin/stats`)).json()) as { paused: boolean };
      expect(stats.paused).toBe(paused);
    }

    // SIGTERM: the twin finishes its work, releases its locks and exits promptly.
    twin.child.kill('SIGTERM');
    const [code] = await once(twin.child, 'exit');
    expect(code).toBe(0);
  });

  it(
    'a port another program holds: one line naming it and MSGX_HTTP_PORT, exit 1, the data directory released',
    { timeout: 300_000 },
    async () => {
      const holder = createServer();
      await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
      const port = (holder.address() as AddressInfo).port;
      try {
        const dir = mkdtempSync(join(tmpdir(), 'msgx-twin-busy-'));
        const twin = spawnTwin({ MSGX_HTTP_PORT: String(port) }, dir);
        expect(await twin.exited).toBe(1);
        const lines = twin.output().trim().split('\n');
        expect(lines.at(-1)).toBe(
          `msgx: cannot listen on 127.0.0.1:${port}: another program is using it (EADDRINUSE); set MSGX_HTTP_PORT to a free port`,
        );
        expect(twin.output()).not.toMatch(/^\s+at /m);
        expect(existsSync(join(dir, '.msgx', 'pg.lock'))).toBe(false);
      } finally {
        holder.close();
      }
    },
  );

  // A service the twin cannot use: one line naming the setting, the target (no password), the
  // reason and what to do; exit 1, no stack, the data directory released. The databases named
  // here do not exist on the real local servers; nothing listens on port 1.
  const missing = `msgx_missing_${process.pid}`;
  const pgAt = (hostPort: string, db: string) => {
    const u = new URL(serviceUrls().pgUrl);
    return `${u.protocol}//${u.username || 'postgres'}:s3cret-pw@${hostPort}/${db}`;
  };
  const myAt = (hostPort: string, db: string) => {
    const u = new URL(serviceUrls().mailboxUrl);
    return `${u.protocol}//${u.username ? `${u.username}${u.password ? `:${u.password}` : ''}@` : ''}${hostPort}/${db}`;
  };
  const pgHost = () => new URL(serviceUrls().pgUrl).host;
  const myHost = () => new URL(serviceUrls().mailboxUrl).host;
  const unusable: [string, () => Record<string, string>, () => string][] = [
    [
      'MSGX_PG_URL naming a database that does not exist',
      () => ({ MSGX_PG_URL: pgAt(pgHost(), missing) }),
      () =>
        `msgx: MSGX_PG_URL: cannot use PostgreSQL at ${pgHost()}/${missing}: database "${missing}" does not exist (3D000); create the database or correct MSGX_PG_URL`,
    ],
    [
      'MSGX_PG_URL at a port nothing listens on',
      () => ({ MSGX_PG_URL: pgAt('127.0.0.1:1', 'test') }),
      () =>
        'msgx: MSGX_PG_URL: cannot use PostgreSQL at 127.0.0.1:1/test: connection refused (ECONNREFUSED); is the database server running? start it or correct MSGX_PG_URL',
    ],
    [
      'MSGX_MAILBOX_URL naming a MariaDB database that does not exist',
      () => ({ MSGX_MAILBOX_URL: myAt(myHost(), missing) }),
      () =>
        `msgx: MSGX_MAILBOX_URL: cannot use the MySQL/MariaDB mailbox at ${myHost()}/${missing}: Unknown database '${missing}' (ER_BAD_DB_ERROR); create the database or correct MSGX_MAILBOX_URL`,
    ],
    [
      'MSGX_MAILBOX_URL at a port nothing listens on',
      () => ({ MSGX_MAILBOX_URL: myAt('127.0.0.1:1', 'test') }),
      () =>
        'msgx: MSGX_MAILBOX_URL: cannot use the MySQL/MariaDB mailbox at 127.0.0.1:1/test: connection refused (ECONNREFUSED); is the database server running? start it or correct MSGX_MAILBOX_URL',
    ],
    [
      'MSGX_KAFKA_BROKERS with no broker listening',
      () => ({ MSGX_KAFKA_BROKERS: '127.0.0.1:1' }),
      () =>
        'msgx: MSGX_KAFKA_BROKERS: cannot use Kafka at 127.0.0.1:1: connection refused (ECONNREFUSED); is the broker running? start it or correct MSGX_KAFKA_BROKERS',
    ],
  ];
  for (const [what, env, line] of unusable) {
    it(
      `${what}: one line naming the setting and what to do, exit 1, no stack, the data directory released`,
      { timeout: 300_000 },
      async () => {
        const dir = mkdtempSync(join(tmpdir(), 'msgx-twin-unusable-'));
        const twin = spawnTwin(env(), dir);
        expect(await twin.exited).toBe(1);
        expect(twin.output().trim().split('\n').at(-1)).toBe(line());
        expect(twin.output()).not.toMatch(/^\s+at /m);
        expect(twin.output()).not.toContain('s3cret-pw');
        expect(existsSync(join(dir, '.msgx', 'pg.lock'))).toBe(false);
      },
    );
  }

  it(
    'two twins on one MSGX_PG_URL, started together: both serve, results are right, each role runs in one of them',
    { timeout: 300_000 },
    async () => {
      const pg = await freshPg({ migrate: false });
      try {
        const env = { MSGX_PG_URL: pg.url };
        // Together on an empty database: migrations and the mailbox tables are created once.
        const [a, b] = await Promise.all([
          startTwin(env, mkdtempSync(join(tmpdir(), 'msgx-twin-a-'))),
          startTwin(env, mkdtempSync(join(tmpdir(), 'msgx-twin-b-'))),
        ]);
        expect((await post(a.base, dayPlan)).status).toBe(200);
        expect((await post(b.base, gateChange)).status).toBe(200);
        for (const twin of [a, b])
          await waitFor(
            async () => {
              const f = (await (await fetch(`${twin.base}/v1/flights/1001`)).json()) as {
                stateVersion?: number;
                GATE?: { CODE: string }[];
              };
              return f.stateVersion === 2 && f.GATE?.[0]?.CODE === 'B14';
            },
            { what: `flight 1001 at B14 through ${twin.base}` },
          );
        // One holder per role lock (poller, pump, dispatcher, sweep) across both twins.
        const held = await pg.db.query<{ n: number }>(
          `SELECT COUNT(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
        expect(held.rows[0]!.n).toBe(4);
        expect(await a.stop('SIGTERM')).toBe(0);
        expect(await b.stop('SIGTERM')).toBe(0);
      } finally {
        await pg.drop();
      }
    },
  );

  it('with the three URLs set: real PostgreSQL, MariaDB and Kafka', { timeout: 300_000 }, async () => {
    const pg = await freshPg({ migrate: false });
    const my = await freshMysql();
    const { kafkaBrokers } = serviceUrls();
    const topicMsg = randomTopic('msgx.msg');
    const topicSchd = randomTopic('msgx.schd');
    try {
      const dir = mkdtempSync(join(tmpdir(), 'msgx-twin-'));
      const twin = await startTwin(
        {
          MSGX_PG_URL: pg.url,
          MSGX_MAILBOX_URL: my.url,
          MSGX_KAFKA_BROKERS: kafkaBrokers.join(','),
          MSGX_TOPIC_MSG: topicMsg,
          MSGX_TOPIC_SCHD: topicSchd,
          MSGX_TOPIC_PARTITIONS: '2',
        },
        dir,
      );
      const health = (await (await fetch(`${twin.base}/health`)).json()) as { checks: Record<string, string> };
      expect(health.checks).toEqual({ database: 'ok', migrations: 'ok', mailbox: 'ok', kafka: 'ok', 'kafka-topics': 'ok' });
      const planRes = await post(twin.base, dayPlan);
      expect(planRes.status).toBe(200);
      const planId = Number(await planRes.text());
      const id = Number(await (await post(twin.base, gateChange)).text());

      // The model: flight 1001 made by the plan (v1), then changed by the gate message (v2). Once
      // both show, a control message of the same flight (v3) goes in; records of one key keep their
      // order, so once the control is on a topic every record of v1 and v2 (a repeat too) is
      // before it. Each topic is then read to its end and judged whole, repeats not dropped.
      const sourceOf = (value: string | null) => (JSON.parse(value!) as { source: { msgId: number } }).source.msgId;
      await waitFor(async () => (await readTopicToEnd(kafkaBrokers, topicMsg)).length >= 2, {
        timeoutMs: 30_000,
        intervalMs: 500,
        what: 'two msgx.msg records',
      });
      const controlRes = await post(twin.base, control);
      expect(controlRes.status).toBe(200);
      const controlId = Number(await controlRes.text());
      const records = await waitFor(
        async () => {
          const r = await readTopicToEnd(kafkaBrokers, topicMsg);
          return r.some((x) => sourceOf(x.value) === controlId) ? r : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500, what: 'the control record on msgx.msg' },
      );
      expect(
        records.map((r) => {
          const v = JSON.parse(r.value!) as { stateVersion: number; source: { msgId: number } };
          return [r.key, v.stateVersion, v.source.msgId];
        }),
      ).toEqual([
        ['1001', 1, planId],
        ['1001', 2, id],
        ['1001', 3, controlId],
      ]);
      const schdRecords = await waitFor(
        async () => {
          const r = await readTopicToEnd(kafkaBrokers, topicSchd);
          return r.some((x) => (JSON.parse(x.value!) as { stateVersion: number }).stateVersion === 3) ? r : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500, what: 'the msgx.schd record of the control (v3)' },
      );
      // A state record may be superseded by a newer one of its flight, never repeated or reordered.
      expect(schdRecords.map((r) => r.key)).toEqual(schdRecords.map(() => '1001'));
      const schdVersions = schdRecords.map((r) => (JSON.parse(r.value!) as { stateVersion: number }).stateVersion);
      expect(schdVersions, 'msgx.schd versions rise').toEqual([...new Set(schdVersions)].sort((x, y) => x - y));
      expect(schdVersions.at(-1)).toBe(3);
      expect(JSON.parse(schdRecords.at(-1)!.value!)).toMatchObject({
        FLID: '1001',
        stateVersion: 3,
        GATE: [{ CODE: 'B14', BEG: '20261129093000', END: '20261129101500' }],
        XREM: 'control',
      });
      // The mailbox row is back-filled in MariaDB.
      await waitFor(
        async () => (await my.query<{ n: number }[]>('SELECT COUNT(*) AS n FROM CMINMSGS WHERE DATE_PROCESSED IS NULL'))[0]!.n === 0,
        {
          what: 'mailbox backfill',
        },
      );
      twin.child.kill('SIGTERM');
      const [code] = await once(twin.child, 'exit');
      expect(code).toBe(0);
    } finally {
      await my.drop();
      await pg.drop();
    }
  });
});
