import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { readTopicToEnd } from '../helpers/kafka.ts';
import { type Emulator, start } from './emulator/index.ts';
import {
  call,
  createTopic,
  FlightModel,
  judgeFlights,
  OPERATOR_KEY,
  OPERATOR_ROLE,
  partitionsOf,
  runCli,
  UPSTREAM_KEY,
  waitFor,
  type Fields,
} from './outside.ts';

/**
 * Journeys through the emulated cloud (test/cloud/emulator): the dev stage as `cdk synth` wrote
 * it, deployed as `cdk deploy` would, driven only from outside — the HTTP API as IAM callers, rows
 * INSERTed into the mailbox table by its owner, a real Kafka consumer, the operator's CLI — and
 * judged by the journey's own model of what it sent. In the order a stage lives: first deploy,
 * traffic, pause, a rotation, a function killed at its timeout, an upgrade under traffic.
 */
const DAY = '20261202';
const assembly = inject('cloudAssembly');
let emu: Emulator;
let owner: mysql.Connection;
const model = new FlightModel();
/** The one topic producers may name (context txTopics: the dispatcher may write it and msgx's own only). */
const txTopic = assembly.context.txTopics!;
/** Flights of this run only (a kept synth, MSGX_CLOUD_ASSEMBLY, reuses its topics across runs). */
const RUN = Date.now().toString(36).slice(-3).toUpperCase();
const F = (n: number) => `${RUN}${n}`;

/** The producers' check-back endpoint (its origin is the deploy's txCheckAllowedOrigins). */
let producer: Server;

beforeAll(async () => {
  producer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"UNKNOWN"}'));
  const origin = new URL(assembly.context.txCheckAllowedOrigins!);
  await new Promise<void>((resolve, reject) => {
    producer.once('error', reject); // a port taken meanwhile fails the file instead of hanging it
    producer.listen(Number(origin.port), origin.hostname, () => resolve());
  });
  emu = await start('dev', { assembly, accessKeys: [OPERATOR_KEY, UPSTREAM_KEY] });
  owner = await mysql.createConnection({ uri: emu.mailbox.ownerUrl });
}, 600_000);

afterAll(async () => {
  producer?.close();
  await owner?.end();
  await emu?.stop();
});

const planned = (flid: string): Fields => ({ FLID: flid, OPDY: DAY, AWCD: 'CZ', FLNO: flid.slice(-4), STAT: 'SCH' });
let seqn = 0;
/** A FLOP that changes exactly one thing of `flid`, never sent before: a gate or an off-block time. */
function change(flid: string): { text: string; fields: Fields } {
  const i = ++seqn;
  const t = `${DAY}${String(8 + (i % 12)).padStart(2, '0')}${String(i % 60).padStart(2, '0')}00`;
  const fields: Fields = i % 2 ? { GATE: [{ CODE: `G${i}`, BEG: t, END: '' }] } : { ETOT: t };
  return { text: flop(i % 2 ? 'GATE' : 'ETOT', { seqn: `c${i}`, dttm: t }, flight({ FLID: flid, ...fields })), fields };
}
const plan = (flids: string[]) =>
  schd('DNLD', { seqn: `plan${++seqn}`, dttm: `${DAY}050000`, opdy: DAY, flights: flids.map((f) => flight(planned(f))) });

async function sendOverApi(flid: string): Promise<number> {
  const c = change(flid);
  const r = await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: c.text });
  if (r.status === 200) model.apply(flid, c.fields);
  return r.status;
}

async function insertRow(flid: string): Promise<void> {
  const c = change(flid);
  await owner.query('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [c.text]);
  model.apply(flid, c.fields);
}

const judge = (flids: string[]) => judgeFlights(emu.apiUrl, emu.kafka.brokers, emu.kafka.topics, model, flids);
const service = () => `Msgx-${emu.stage}-Service`;
const outputs = () =>
  (JSON.parse(readFileSync(join(assembly.outdir, `${service()}.template.json`), 'utf8')) as { Outputs: Record<string, { Value: unknown }> })
    .Outputs;

describe('the dev stage in the emulated cloud', () => {
  it('first deploy: the migration runs on the empty database before anything else, every function runs its own code', async () => {
    const [first] = emu.cloudFormation.triggerResults;
    // The migrate bundle's own migrations (cdk.out), all applied by the trigger, and the topics created.
    const shipped = readdirSync(join(emu.lambda.functions.get(emu.functionName('migrate'))!.latest.codeDir, 'migrations'))
      .filter((f) => /^\d+_.+\.sql$/.test(f))
      .sort();
    expect(shipped.length).toBeGreaterThan(0);
    expect(first).toMatchObject({ ok: true, payload: { applied: shipped, alreadyApplied: 0 } });
    for (const topic of Object.values(emu.kafka.topics)) expect(await partitionsOf(emu.kafka.brokers, topic)).toBe(6);
    // Nothing but the migration ran before it ended.
    const early = emu.lambda.invocations.filter((i) => i.startedAt < first!.endedAt && i.functionName !== emu.functionName('migrate'));
    expect(early).toEqual([]);
    // Six functions, six assets: each answers as itself.
    const roles = ['ingress', 'poller', 'pump', 'dispatcher', 'sweep', 'migrate'];
    const keys = roles.map((r) => emu.lambda.functions.get(emu.functionName(r))!.latest.codeKey);
    expect(new Set(keys).size).toBe(roles.length);
    const scheduled = await Promise.all(['poller', 'pump', 'dispatcher', 'sweep'].map((r) => emu.invoke(r)));
    expect(scheduled.map((r) => [r.ok, (r.payload as { role?: string }).role])).toEqual(
      ['poller', 'pump', 'dispatcher', 'sweep'].map((r) => [true, r]),
    );
    const health = await call(emu.apiUrl, 'GET', '/health');
    expect(health.status).toBe(200);
  });

  const apiFlids = [F(101), F(102), F(103)];

  it('a day plan and gate changes through the API: the flights read back through the API, the events by a Kafka consumer', async () => {
    // Unsigned: refused by the gateway, nothing stored (the model would be one version off).
    const unsigned = await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: change(apiFlids[0]!).text, principal: null });
    expect(unsigned.status).toBe(403);
    expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: plan(apiFlids) })).status).toBe(200);
    for (const f of apiFlids) model.plan(f, planned(f));
    for (let i = 0; i < 9; i++) expect(await sendOverApi(apiFlids[i % 3]!)).toBe(200);
    await judge(apiFlids);
  });

  const rowFlids = [F(201), F(202)];

  it('rows inserted straight into CMINMSGS reach the read API and both topics; the owner sees every row SUCCEEDED', async () => {
    const [before] = await owner.query<mysql.RowDataPacket[]>('SELECT COUNT(*) AS n FROM CMINMSGS');
    await owner.query('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [plan(rowFlids)]);
    for (const f of rowFlids) model.plan(f, planned(f));
    for (let i = 0; i < 6; i++) await insertRow(rowFlids[i % 2]!);
    await judge(rowFlids);
    const total = Number(before[0]!.n) + 7;
    await waitFor(
      async () => {
        const [rows] = await owner.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM CMINMSGS WHERE PROC_STATUS = 'SUCCEEDED'`);
        return Number(rows[0]!.n) === total;
      },
      { what: 'every mailbox row back-filled SUCCEEDED' },
    );
  });

  it('a transactional message: prepared, committed, delivered to the consumer, acknowledged; a rolled-back one never arrives', async () => {
    await createTopic(emu.kafka.brokers, txTopic);
    const prepare = (n: number) =>
      call(emu.apiUrl, 'POST', '/v1/tx-messages', {
        body: {
          topic: txTopic,
          key: `order-${n}`,
          payload: { order: n },
          checkUrl: `${assembly.context.txCheckAllowedOrigins}/check`,
          checkAfterMs: 600_000,
        },
      });
    const a = await prepare(1);
    expect(a).toMatchObject({ status: 201, body: { status: 'PREPARED' } });
    const id = (a.body as { id: string }).id;
    const b = await prepare(2);
    const idB = (b.body as { id: string }).id;
    expect((await call(emu.apiUrl, 'POST', `/v1/tx-messages/${idB}/rollback`)).body).toMatchObject({ status: 'ROLLED_BACK' });
    expect((await call(emu.apiUrl, 'POST', `/v1/tx-messages/${id}/commit`)).body).toMatchObject({ status: 'COMMITTED' });
    const delivered = await waitFor(
      async () => {
        const r = await readTopicToEnd(emu.kafka.brokers, txTopic);
        return r.length > 0 ? r : null;
      },
      { what: 'the committed message at the consumer' },
    );
    expect(delivered.map((r) => [r.key, JSON.parse(r.value!)])).toEqual([['order-1', { order: 1 }]]);
    const statusOf = async (txId: string) =>
      ((await call(emu.apiUrl, 'GET', `/v1/tx-messages/${txId}`)).body as { status?: string }).status;
    await waitFor(async () => (await statusOf(id)) === 'DELIVERED', { what: 'DELIVERED' });
    expect((await call(emu.apiUrl, 'POST', `/v1/tx-messages/${id}/ack`)).body).toMatchObject({ status: 'CONSUMED' });
    expect(await statusOf(idB)).toBe('ROLLED_BACK');
    expect((await readTopicToEnd(emu.kafka.brokers, txTopic)).map((r) => r.key)).toEqual(['order-1']);
  });

  it("a setting of the stage in cdk.json reaches the functions: the stage's body limit holds at the API and for rows in CMINMSGS", async () => {
    // globalSetup's synth merged stages.dev.env.MSGX_MAX_BODY_BYTES into cdk.json: well under the 1 MiB default.
    const limit = Number((assembly.stageSettings?.env as Record<string, unknown> | undefined)?.MSGX_MAX_BODY_BYTES);
    expect(limit).toBeGreaterThan(0);
    expect(limit).toBeLessThan(1024 * 1024);
    const flid = F(151);
    expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: plan([flid]) })).status).toBe(200);
    model.plan(flid, planned(flid));
    // Whitespace after the root element keeps the XML well formed at any size.
    const sized = (text: string, bytes: number) => text + '\n'.padEnd(bytes - Buffer.byteLength(text), ' ');
    const over = change(flid);
    const refused = await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: sized(over.text, limit + 1) });
    expect(refused).toMatchObject({ status: 413, body: { error: 'payload_too_large', detail: `the body is larger than ${limit} bytes` } });
    const atLimit = change(flid);
    expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: sized(atLimit.text, limit) })).status).toBe(200);
    model.apply(flid, atLimit.fields);
    // The pump reads the mailbox with the same limit: a row over it is dead, its owner told why, the flight untouched.
    const [inserted] = await owner.query<mysql.ResultSetHeader>('INSERT INTO CMINMSGS (MSG_TEXT) VALUES (?)', [
      sized(change(flid).text, limit + 4096),
    ]);
    const row = await waitFor(
      async () => {
        const [rows] = await owner.query<mysql.RowDataPacket[]>('SELECT PROC_STATUS, PROC_NOTE FROM CMINMSGS WHERE ID = ?', [
          inserted.insertId,
        ]);
        return rows[0]?.PROC_STATUS ? rows[0] : null;
      },
      { what: `mailbox row ${inserted.insertId} back-filled` },
    );
    expect(row).toMatchObject({ PROC_STATUS: 'DEAD', PROC_NOTE: `MALFORMED: message larger than ${limit} bytes` });
    await judge([flid]);
  });

  it('pause and resume as a named operator: heads wait while the schedules keep running; an upstream caller is refused', async () => {
    const operator = { principal: OPERATOR_ROLE };
    // Admin routes answer the stage's operators only: unsigned at the gateway, an upstream role in the ingress.
    expect((await call(emu.apiUrl, 'POST', '/admin/pause', { principal: null })).status).toBe(403);
    const upstream = await call(emu.apiUrl, 'POST', '/admin/pause');
    expect(upstream.status).toBe(403);
    expect((await call(emu.apiUrl, 'GET', '/admin/stats', operator)).body).toMatchObject({ paused: false });
    expect((await call(emu.apiUrl, 'POST', '/admin/pause', operator)).body).toMatchObject({ paused: true, changed: true });
    const held = apiFlids[0]!;
    const version = model.get(held)!.version;
    expect(await sendOverApi(held)).toBe(200);
    // Two ticks of the pump's schedule invoke it, and it leaves the head alone.
    const names = String(outputs().ScheduleNames!.Value).split(',');
    const group = String(outputs().ScheduleGroupName!.Value);
    const pump = names.find((n) => n.endsWith('-pump'))!;
    const since = emu.schedules.firings.length;
    await waitFor(
      async () => emu.schedules.firings.slice(since).filter((f) => f.schedule === `${group}/${pump}` && f.invoked).length >= 2,
      { what: "two invoked ticks of the pump's schedule" },
    );
    expect(((await call(emu.apiUrl, 'GET', `/v1/flights/${held}`)).body as { stateVersion: number }).stateVersion).toBe(version);
    expect((await call(emu.apiUrl, 'POST', '/admin/resume', operator)).body).toMatchObject({ paused: false, changed: true });
    await judge([held]);
  });

  it("the operator's CLI from a laptop, signed with SigV4: status, dead, trace, replay, pause and resume; the upstream's keys are refused", async () => {
    const op = (...args: string[]) => runCli(emu.apiUrl, OPERATOR_KEY, args);
    const api = /\(the API at 127\.0\.0\.1:\d+ \(SigV4, eu-west-1\)\)/;
    const status = await op('status');
    expect(status).toMatchObject({ code: 0, stderr: '' });
    expect(status.stdout).toMatch(/^pipeline +running$/m);
    expect(status.stdout).toMatch(/^messages by status$/m);

    // The upstream's keys verify (the gateway lets them through), and the ingress refuses them as no operator.
    const refusal =
      /^msgx: 403 forbidden: admin route: arn:aws:sts::210987654321:assumed-role\/cmin-upstream\/feeder is not an operator \(its role is not in MSGX_OPERATOR_PRINCIPALS\)\n$/;
    for (const args of [['status'], ['dead'], ['trace', '1'], ['replay', '--kind', 'proc', '--ids', '1'], ['pause'], ['resume']]) {
      const r = await runCli(emu.apiUrl, UPSTREAM_KEY, args);
      expect(r, args.join(' ')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringMatching(refusal) });
    }
    // Keys the account does not know, a wrong secret, no signature: the gateway refuses, saying so.
    const forged = await runCli(emu.apiUrl, { ...OPERATOR_KEY, secretAccessKey: 'not-alice-secret/0123456789abcdefghijkl' }, ['pause']);
    expect(forged).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^msgx: 403 Forbidden: the signature does not match \(API Gateway refused/),
    });
    const unsigned = await runCli(emu.apiUrl, null, ['pause']);
    expect(unsigned).toMatchObject({ code: 1, stderr: expect.stringMatching(/^msgx: 403 Forbidden \(API Gateway refused/) });
    // None of those paused anything: a change goes through at once.
    const [held, behind] = [F(161), F(162)];
    expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: plan([held, behind]) })).status).toBe(200);
    for (const f of [held, behind]) model.plan(f, planned(f));
    expect(await sendOverApi(held)).toBe(200);
    await judge([held]);

    // A message msgx cannot process holds the head until it dies EXHAUSTED; the one behind it waits (FIFO).
    const blocked = await call(emu.apiUrl, 'POST', '/cminmsgs/send', {
      xml: flop('WXYZ', { seqn: `cli-unsupported-${RUN}`, dttm: `${DAY}120000` }, flight({ FLID: held, ETOT: `${DAY}120000` })),
    });
    expect(blocked.status).toBe(200);
    const blocker = Number(blocked.text);
    expect(await sendOverApi(behind)).toBe(200);
    const dead = await waitFor(
      async () => {
        const r = await op('dead', '--kind', 'proc');
        return new RegExp(`^\\s*${blocker}\\b.*EXHAUSTED`, 'm').test(r.stdout) ? r : null;
      },
      { timeoutMs: 180_000, what: `msgx dead to list #${blocker} EXHAUSTED` },
    );
    expect(dead).toMatchObject({ code: 0, stderr: '' });
    await judge([behind]);
    const trace = await op('trace', String(blocker));
    expect(trace).toMatchObject({ code: 0, stderr: '' });
    expect(trace.stdout).toMatch(new RegExp(`^message #${blocker}  FLOP/WXYZ  DEAD$`, 'm'));
    expect(trace.stdout).toMatch(/^ATTEMPTS$/m);
    expect(trace.stdout).toMatch(/EXHAUSTED +UNSUPPORTED: FLOP subtype "WXYZ" is not supported \(after 5 attempts\)/);

    // Replayed, it heads the queue again: a change sent now waits behind it, then goes through once it dies again.
    const replay = await op('replay', '--kind', 'proc', '--ids', String(blocker));
    expect(replay).toMatchObject({ code: 0, stderr: '' });
    expect(replay.stdout).toMatch(/^moved 1$/m);
    const version = model.get(behind)!.version;
    expect(await sendOverApi(behind)).toBe(200);
    await new Promise((r) => setTimeout(r, 6_000));
    expect(((await call(emu.apiUrl, 'GET', `/v1/flights/${behind}`)).body as { stateVersion: number }).stateVersion).toBe(version);
    await judge([behind]);

    // Pause and resume from the CLI: the head waits across two ticks of the pump's schedule, then goes on.
    const paused = await op('pause');
    expect(paused).toMatchObject({ code: 0, stderr: '' });
    expect(paused.stdout).toMatch(/^pipeline paused: no head processing; ingress, delivery and check-backs go on /);
    expect(paused.stdout).toMatch(api);
    expect((await op('status')).stdout).toMatch(/^pipeline +PAUSED$/m);
    const before = model.get(held)!.version;
    expect(await sendOverApi(held)).toBe(200);
    const group = String(outputs().ScheduleGroupName!.Value);
    const pump = String(outputs().ScheduleNames!.Value)
      .split(',')
      .find((n) => n.endsWith('-pump'))!;
    const since = emu.schedules.firings.length;
    await waitFor(
      async () => emu.schedules.firings.slice(since).filter((f) => f.schedule === `${group}/${pump}` && f.invoked).length >= 2,
      { what: "two invoked ticks of the pump's schedule" },
    );
    expect(((await call(emu.apiUrl, 'GET', `/v1/flights/${held}`)).body as { stateVersion: number }).stateVersion).toBe(before);
    const resumed = await op('resume');
    expect(resumed).toMatchObject({ code: 0, stderr: '' });
    expect(resumed.stdout).toMatch(/^pipeline running /);
    await judge([held, behind]);
  });

  it('a credential rotation while the functions are warm: the next logins are refused, the functions re-read the secret and carry on', async () => {
    const appArn = emu.secrets.require('msgx/dev/postgres-app').arn;
    const warm = emu.lambda.environments(emu.functionName('ingress'));
    expect(warm).toBeGreaterThan(0);
    // Alternating users twice: the functions' user ends with a password they never saw.
    await emu.rotate('msgx/dev/postgres-app');
    await emu.rotate('msgx/dev/postgres-app');
    await emu.rotate('msgx/dev/postgres');
    // Their sessions end (a failover would do the same): the next statement needs a new login.
    const su = new pg.Client({ connectionString: emu.pg.superUrl });
    await su.connect();
    await su.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename LIKE 'msgx_app%'`);
    await su.end();
    const reads = emu.secrets.apiReads.length;
    for (let i = 0; i < 4; i++) expect(await sendOverApi(apiFlids[i % 3]!)).toBe(200);
    for (let i = 0; i < 4; i++) await insertRow(rowFlids[i % 2]!);
    await judge([...apiFlids, ...rowFlids]);
    // The warm ingress read the secret from Secrets Manager itself (past the extension's cache).
    expect(emu.secrets.apiReads.slice(reads)).toContain(appArn);
  });

  it('coverage: with its schedule off and its chain broken, the dispatcher is started by an ingress post', async () => {
    const dispatcher = emu.functionName('dispatcher');
    const key = [...emu.schedules.schedules.keys()].find((k) => emu.schedules.schedules.get(k)!.Target.Arn.includes(dispatcher))!;
    const sched = emu.schedules.schedules.get(key)!;
    emu.schedules.put({ ...sched, State: 'DISABLED' });
    const running = () => emu.lambda.invocations.filter((i) => i.functionName === dispatcher && !i.endedAt);
    try {
      // The running chain hands over forever: freeze every dispatcher until none is left (each is killed at its timeout).
      await waitFor(
        async () => {
          emu.lambda.stall(dispatcher);
          return running().length === 0 || null;
        },
        { timeoutMs: 300_000, what: 'the dispatcher chain to end' },
      );
      const flid = F(251);
      expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: plan([flid]) })).status).toBe(200);
      model.plan(flid, planned(flid));
      const posted = Date.now();
      // Only the ingress's kick can start one: the schedule is off and no successor was left. Posts
      // go on past the kick's debounce while a killed run's lock is still held on the server.
      await waitFor(
        async () => {
          expect(await sendOverApi(flid)).toBe(200);
          await new Promise((r) => setTimeout(r, 2_500));
          return emu.lambda.invocations.find((i) => i.functionName === dispatcher && i.startedAt >= posted) ?? null;
        },
        { timeoutMs: 60_000, what: 'a dispatcher started after the post' },
      );
      await judge([flid]);
    } finally {
      emu.schedules.put({ ...emu.schedules.schedules.get(key)!, State: 'ENABLED' });
    }
  }, 420_000);

  it('a pump killed at its timeout in the middle of a step: the next invocation carries on, nothing lost or out of order', async () => {
    const pump = emu.functionName('pump');
    const flids = [F(301), F(302)];
    expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: plan(flids) })).status).toBe(200);
    for (const f of flids) model.plan(f, planned(f));
    let sending = true;
    const sender = (async () => {
      for (let i = 0; sending; i++) expect(await sendOverApi(flids[i % 2]!)).toBe(200);
    })();
    // Stall a pump while it holds a transaction open (its backend is mid-step), else let it go and try again.
    const stalled = await waitFor(
      async () => {
        for (const s of emu.lambda.stall(pump)) {
          if (await inTransaction(s.pid)) return s;
          s.resume();
        }
        return null;
      },
      { timeoutMs: 120_000, what: 'a pump caught in the middle of a step' },
    );
    const killed = await waitFor(async () => emu.lambda.invocations.find((i) => i.functionName === pump && i.outcome === 'timeout'), {
      timeoutMs: 120_000,
      what: `the stalled pump (pid ${stalled.pid}) to be killed at its timeout`,
    });
    sending = false;
    await sender;
    expect(killed.error?.errorType).toBe('Sandbox.Timedout');
    await judge(flids);
    // A later invocation of the pump took over (it may still be in its loop: its outcome comes at its end).
    await waitFor(async () => emu.lambda.invocations.some((i) => i.functionName === pump && i.startedAt > killed.endedAt!), {
      what: 'a pump invocation after the killed one',
    });
  });

  it('an upgrade deploy with traffic flowing: the new migration runs first, new code only after it, nothing lost', async () => {
    const flids = [F(401), F(402)];
    expect((await call(emu.apiUrl, 'POST', '/cminmsgs/send', { xml: plan(flids) })).status).toBe(200);
    for (const f of flids) model.plan(f, planned(f));
    const oldKeys = new Set([...emu.lambda.functions.values()].map((f) => f.latest.codeKey));
    let sending = true;
    const statuses: number[] = [];
    const sender = (async () => {
      for (let i = 0; sending; i++) {
        statuses.push(await sendOverApi(flids[i % 2]!));
        if (i % 3 === 0) await insertRow(flids[(i + 1) % 2]!);
      }
    })();
    const migration = await emu.upgrade({
      label: 'cloud_upgrade_probe',
      sql: 'CREATE TABLE cloud_upgrade_probe (id int);\nSELECT pg_sleep(3);\n',
    });
    const upgraded = emu.cloudFormation.triggerResults[1]!;
    expect(upgraded).toMatchObject({ ok: true, payload: { applied: [migration] } });
    const newKeys = new Set([...emu.lambda.functions.values()].map((f) => f.latest.codeKey).filter((k) => !oldKeys.has(k)));
    expect(newKeys.size).toBe(6);
    // New code of the other functions starts only after the migration succeeded.
    await waitFor(async () => emu.lambda.invocations.some((i) => newKeys.has(i.codeKey) && i.functionName === emu.functionName('pump')), {
      what: 'the new pump code to run',
    });
    sending = false;
    await sender;
    const early = emu.lambda.invocations.filter(
      (i) => newKeys.has(i.codeKey) && i.functionName !== emu.functionName('migrate') && i.startedAt < upgraded.endedAt,
    );
    expect(early.map((i) => `${i.functionName} ${new Date(i.startedAt).toISOString()}`)).toEqual([]);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    await judge([...flids, ...apiFlids, ...rowFlids]);
  });
});

/** Whether the process `pid` has a PostgreSQL session inside a transaction (its backend idle in transaction or running a statement). */
async function inTransaction(pid: number): Promise<boolean> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    const m = /^socket:\[(\d+)\]$/.exec(safeReadlink(`/proc/${pid}/fd/${fd}`));
    if (m) inodes.add(m[1]!);
  }
  const ports: number[] = [];
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols[9] && inodes.has(cols[9])) ports.push(Number.parseInt(cols[1]!.split(':')[1]!, 16));
  }
  if (ports.length === 0) return false;
  const su = new pg.Client({ connectionString: emu.pg.superUrl });
  await su.connect();
  try {
    const r = await su.query(`SELECT 1 FROM pg_stat_activity WHERE client_port = ANY($1) AND xact_start IS NOT NULL`, [ports]);
    return (r.rowCount ?? 0) > 0;
  } finally {
    await su.end();
  }
}

function safeReadlink(p: string): string {
  try {
    return readlinkSync(p);
  } catch {
    return '';
  }
}
