import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import kafkajs from 'kafkajs';
import { expect } from 'vitest';
import { type AccessKey, IAM_PRINCIPAL_HEADER } from './emulator/index.ts';
import { readTopicToEnd, type ReadRecord } from '../helpers/kafka.ts';
import { REPO } from './emulator/synth.ts';

/**
 * What a journey through the emulated cloud uses to look at msgx from outside: the HTTP API as
 * an IAM caller, a real Kafka consumer (test/helpers/kafka.ts's, the reader every tier judges by),
 * polling waits, and the journey's own model of its flights. Nothing here runs msgx's code.
 */
const { Kafka, logLevel } = kafkajs;

export const UPSTREAM_ROLE = 'arn:aws:sts::210987654321:assumed-role/cmin-upstream/feeder';
/** The stage's one operator role (context operatorPrincipals), and a session of it as API Gateway names the caller. */
export const OPERATOR_ROLE_ARN = 'arn:aws:iam::210987654321:role/msgx-operator';
export const OPERATOR_ROLE = 'arn:aws:sts::210987654321:assumed-role/msgx-operator/alice';

/** Temporary credentials of those two callers, as the emulated account issued them (API Gateway verifies their signatures). */
export const OPERATOR_KEY: AccessKey = {
  accessKeyId: 'ASIAOPERATORALICE001',
  secretAccessKey: 'alice/operator/secret/0123456789abcdefghij',
  sessionToken: 'alice-operator-session-token',
  principal: OPERATOR_ROLE,
};
export const UPSTREAM_KEY: AccessKey = {
  accessKeyId: 'ASIAUPSTREAMFEEDER01',
  secretAccessKey: 'feeder/upstream/secret/0123456789abcdefghi',
  sessionToken: 'feeder-upstream-session-token',
  principal: UPSTREAM_ROLE,
};

const runFile = promisify(execFile);

/**
 * `bin/msgx.mjs` as a person runs it from a laptop: pointed at the API (MSGX_API_URL, signing on
 * with MSGX_API_SIGV4 as for a custom domain) with `key` as the only credentials of the default
 * chain (no profile, no instance metadata), in the API's region.
 */
export async function runCli(
  apiUrl: string,
  key: Pick<AccessKey, 'accessKeyId' | 'secretAccessKey' | 'sessionToken'> | null,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MSGX_') && !k.startsWith('AWS_')));
  const env: Record<string, string> = {
    ...(clean as Record<string, string>),
    MSGX_API_URL: apiUrl,
    AWS_REGION: 'eu-west-1',
    AWS_CONFIG_FILE: '/dev/null',
    AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
    AWS_EC2_METADATA_DISABLED: 'true',
    ...(key
      ? {
          MSGX_API_SIGV4: '1',
          AWS_ACCESS_KEY_ID: key.accessKeyId,
          AWS_SECRET_ACCESS_KEY: key.secretAccessKey,
          ...(key.sessionToken ? { AWS_SESSION_TOKEN: key.sessionToken } : {}),
        }
      : {}),
  };
  try {
    const r = await runFile(process.execPath, [join(REPO, 'bin', 'msgx.mjs'), ...args], { cwd: REPO, env, timeout: 120_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

export async function waitFor<T>(check: () => Promise<T | null | false | undefined>, o: { timeoutMs?: number; what: string }): Promise<T> {
  const until = Date.now() + (o.timeoutMs ?? 60_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${o.what}${last ? ` (last error: ${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** One call of the HTTP API, as `principal` (an IAM caller) or unsigned. */
export async function call(
  apiUrl: string,
  method: string,
  path: string,
  o: { body?: unknown; xml?: string; principal?: string | null } = {},
): Promise<{ status: number; body: unknown; text: string }> {
  const principal = o.principal === undefined ? UPSTREAM_ROLE : o.principal;
  const headers: Record<string, string> = principal ? { [IAM_PRINCIPAL_HEADER]: principal } : {};
  let body: string | undefined;
  if (o.xml !== undefined) [headers['content-type'], body] = ['application/xml', o.xml];
  else if (o.body !== undefined) [headers['content-type'], body] = ['application/json', JSON.stringify(o.body)];
  const res = await fetch(`${apiUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: the text is the body
  }
  return { status: res.status, body: parsed, text };
}

/** Creates a topic as its owner would (a consumer's own topic for transactional messages). */
export async function createTopic(brokers: string[], topic: string): Promise<void> {
  const admin = new Kafka({ clientId: 'cloud-journey-admin', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
}

/** Partitions of a topic as the broker reports them (nothing when the topic does not exist). */
export async function partitionsOf(brokers: string[], topic: string): Promise<number> {
  const admin = new Kafka({ clientId: 'cloud-journey-admin', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const md = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => ({ topics: [] }));
    return md.topics[0]?.partitions.length ?? 0;
  } finally {
    await admin.disconnect();
  }
}

export type Fields = Record<string, string | Record<string, string>[]>;

/** The journey's model of its flights: the fields a reader must see and the version (one step per change sent). */
export class FlightModel extends Map<string, { fields: Fields; version: number }> {
  plan(flid: string, fields: Fields): void {
    this.set(flid, { fields, version: 1 });
  }

  apply(flid: string, fields: Fields): void {
    const m = this.get(flid)!;
    m.fields = { ...m.fields, ...fields };
    m.version++;
  }
}

/**
 * The model's flights as readers see them: the read API shows each at its modelled version and
 * fields; on msgx.msg each flight's change events carry versions 1..n in order (a repeat of an
 * event id, at-least-once delivery, counts once); the last msgx.schd record per flight is the model.
 */
export async function judgeFlights(
  apiUrl: string,
  brokers: string[],
  topics: { msg: string; schd: string },
  model: FlightModel,
  flids: string[],
): Promise<void> {
  await waitFor(
    async () => {
      for (const flid of flids) {
        const r = await call(apiUrl, 'GET', `/v1/flights/${flid}`);
        if (r.status !== 200 || (r.body as { stateVersion: number }).stateVersion !== model.get(flid)!.version) return false;
      }
      return true;
    },
    { timeoutMs: 120_000, what: `the read API to show ${flids.join(', ')} at their modelled versions` },
  );
  for (const flid of flids) {
    const r = await call(apiUrl, 'GET', `/v1/flights/${flid}`);
    expectMatch(r.body, { ...model.get(flid)!.fields, stateVersion: model.get(flid)!.version }, `GET /v1/flights/${flid}`);
  }
  const want = (flid: string) => Array.from({ length: model.get(flid)!.version }, (_, i) => i + 1);
  const versions = await waitFor(
    async () => {
      const v = perFlid(await readTopicToEnd(brokers, topics.msg), (x) => (x as { stateVersion: number }).stateVersion);
      return flids.every((f) => JSON.stringify(v.get(f)) === JSON.stringify(want(f))) ? v : null;
    },
    { timeoutMs: 120_000, what: `${topics.msg} to carry versions 1..n of ${flids.join(', ')}` },
  ).catch(async () => perFlid(await readTopicToEnd(brokers, topics.msg), (x) => (x as { stateVersion: number }).stateVersion));
  for (const flid of flids)
    if (JSON.stringify(versions.get(flid)) !== JSON.stringify(want(flid)))
      throw new Error(`${topics.msg} ${flid}: versions ${JSON.stringify(versions.get(flid))}, expected ${JSON.stringify(want(flid))}`);
  const last = await waitFor(
    async () => {
      const seen = new Map<string, Record<string, unknown>>();
      for (const r of await readTopicToEnd(brokers, topics.schd))
        if (r.value && r.key) seen.set(r.key, JSON.parse(r.value) as Record<string, unknown>);
      return flids.every((f) => seen.get(f)?.stateVersion === model.get(f)!.version) ? seen : null;
    },
    { timeoutMs: 60_000, what: `the last ${topics.schd} record of ${flids.join(', ')} to be the modelled version` },
  );
  for (const flid of flids)
    expectMatch(last.get(flid), { ...model.get(flid)!.fields, stateVersion: model.get(flid)!.version }, `${topics.schd} ${flid}`);
}

function perFlid(records: ReadRecord[], pick: (value: unknown) => number): Map<string, number[]> {
  const seen = new Set<string>();
  const out = new Map<string, number[]>();
  for (const r of records) {
    // Per flight: a kept synth (MSGX_CLOUD_ASSEMBLY) reuses the topics, and each run's fresh
    // database numbers its events from 1 again, so an id alone would match an earlier run's event.
    const id = `${r.key}|${r.headers['msgx-event-id'] ?? `${r.partition}:${r.offset}`}`;
    if (seen.has(id) || !r.value || !r.key) continue;
    seen.add(id);
    out.set(r.key, [...(out.get(r.key) ?? []), pick(JSON.parse(r.value))]);
  }
  return out;
}

function expectMatch(got: unknown, want: Record<string, unknown>, what: string): void {
  expect(got, what).toMatchObject(want);
}
