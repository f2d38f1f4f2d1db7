import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { waitFor } from '../helpers/services.ts';
import { fileSink } from '../helpers/fileSink.ts';
import { eventually, type Fields, FlightModel, useJourney, useServer } from '../helpers/journey.ts';
import { twinCli } from '../helpers/twinCli.ts';

/**
 * Journeys of the relay's other publishers, driven only from outside: flights go in through the
 * mailbox table (MariaDB) and `POST /cminmsgs/send`; what comes out is judged where a user sees it
 * — a webhook receiver of the test's own (a plain node:http server that verifies msgx's signature
 * with the documented recipe, recomputing the HMAC itself) and the twin's file sink
 * (`.msgx/events/<topic>.jsonl`, the twin runs without brokers); the operator works through the
 * CLI (`bin/msgx.mjs`). Each journey is judged against a model the test builds from what it sent.
 * Its own PostgreSQL and MariaDB databases and its own twin directory: nothing shared with other
 * test files.
 */
const DAY = '20261130';
const SECRET = randomBytes(24).toString('hex');
/** The twin's MSGX_DELIVERY_MAX_RETRY_COUNT: attempts before an event is DEAD. */
const MAX_ATTEMPTS = 8;

// ---- The receiver: a user's webhook endpoint ----------------------------------------------------

interface Post {
  eventId: string;
  type: string;
  key: string | null;
  value: string | null;
  /** The status the receiver answered. */
  answered: number;
}
/** Every POST in arrival order, whatever was answered. */
const posts: Post[] = [];
/** Posts whose signature (or signed headers) did not verify: must stay empty. */
const signatureProblems: string[] = [];
/** The receiver is down: it answers 503 to this many more posts. */
let outageLeft = 0;
/** Flights whose events the receiver refuses (400) until it is fixed. */
const refusedKeys = new Set<string>();

/**
 * The documented recipe (docs/outbox.md "Webhooks", docs/txmsg.md "Verifying msgx's signature"),
 * done here from scratch: `msgx-signature: t=<s>,v1=<hex>`, v1 = HMAC-SHA256(secret, t + "." +
 * the raw body bytes), t within 5 minutes; the msgx headers must agree with the signed body.
 */
function signatureProblem(raw: Buffer, headers: IncomingHttpHeaders): string | null {
  const header = headers['msgx-signature'];
  if (typeof header !== 'string') return 'no msgx-signature header';
  const parts = header.split(',').map((p) => p.trim().split('='));
  const t = parts.find(([k]) => k === 't')?.[1];
  const v1 = parts.filter(([k]) => k === 'v1').map(([, v]) => v ?? '');
  if (!t || !/^\d+$/.test(t) || v1.length === 0) return `malformed header ${header}`;
  if (Math.abs(Date.now() / 1000 - Number(t)) > 300) return `t=${t} is more than 5 minutes away`;
  const want = createHmac('sha256', SECRET).update(`${t}.`).update(raw).digest();
  if (!v1.some((v) => /^[0-9a-f]{64}$/.test(v) && timingSafeEqual(Buffer.from(v, 'hex'), want)))
    return `signature mismatch on ${raw.toString('utf8').slice(0, 80)}`;
  const body = JSON.parse(raw.toString('utf8')) as { eventId: unknown; type: unknown };
  if (headers['msgx-event-id'] !== String(body.eventId))
    return `msgx-event-id ${String(headers['msgx-event-id'])} is not the signed eventId ${String(body.eventId)}`;
  if (headers['msgx-event-type'] !== body.type)
    return `msgx-event-type ${String(headers['msgx-event-type'])} is not the signed type ${String(body.type)}`;
  return null;
}

const receiver = useServer((req, res) => {
  if (req.method !== 'POST') {
    // msgx may probe a receiver that timed out with HEAD: any answer means "up".
    res.writeHead(200).end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks);
    const problem = signatureProblem(raw, req.headers);
    const body = JSON.parse(raw.toString('utf8')) as { eventId: number | string; type: string; key: string | null; value: string | null };
    let answered = 200;
    if (problem) {
      signatureProblems.push(problem);
      answered = 401;
    } else if (outageLeft > 0) {
      outageLeft--;
      answered = 503;
    } else if (body.key !== null && refusedKeys.has(body.key)) answered = 400;
    posts.push({ eventId: String(body.eventId), type: body.type, key: body.key, value: body.value, answered });
    res.writeHead(answered, { 'content-type': 'application/json' }).end(answered === 200 ? '{"ok":true}' : '{"error":"refused"}');
  });
});

// No brokers: the main publisher is the file sink; the webhook is the fan-out every target has.
const world = useJourney('delivery', {
  mailbox: true,
  env: () => ({
    MSGX_FANOUT_WEBHOOKS: `${receiver.origin}/hooks/flights`,
    MSGX_SIGNING_SECRET: SECRET,
    MSGX_DELIVERY_INITIAL_BACKOFF: '200ms',
    MSGX_DELIVERY_MAX_BACKOFF: '1s',
    MSGX_DELIVERY_MAX_RETRY_COUNT: String(MAX_ATTEMPTS),
  }),
});

// ---- The independent model ----------------------------------------------------------------------

const model = new FlightModel();
const planned = (flid: string): Fields => ({ FLID: flid, OPDY: DAY, AWCD: 'MU', FLNO: flid.slice(-4), STAT: 'SCH' });
const pad = (n: number) => String(n).padStart(2, '0');

/** Every FLOP carries a value never sent before, so each one changes its flight exactly once. */
function nextFlop(i: number, flid: string): { text: string; apply: (msgId: number) => void } {
  const t = `${DAY}${pad(6 + (i % 12))}${pad(i % 60)}00`;
  const kind = i % 3;
  const fields: Fields =
    kind === 0 ? { ETOT: t } : kind === 1 ? { XREM: `delivery remark ${i}` } : { STND: [{ CODE: `S${i}`, BEG: t, END: '' }] };
  const styp = kind === 0 ? 'ETOT' : kind === 1 ? 'UPDT' : 'STND';
  return {
    text: flop(styp, { seqn: `d${i}`, dttm: t }, flight({ FLID: flid, ...fields })),
    apply: (msgId) => model.apply(flid, fields, msgId),
  };
}

/** Posts one message to the ingress; returns the mailbox ID it answered with. */
async function postToIngress(text: string): Promise<number> {
  const res = await fetch(`${world.twin.base}/cminmsgs/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/xml' },
    body: text,
  });
  const body = await res.text();
  expect(res.status, body).toBe(200);
  return Number(body);
}

const settled = (flids: string[]) => model.settled(world.twin.base, flids);

/** A delivered record as either destination shows it. */
interface Delivered {
  eventId: string;
  type: string;
  key: string | null;
  value: string | null;
}

/** The receiver's accepted posts, in arrival order, each event once (consumers dedupe by eventId). */
function receivedOnce(): Delivered[] {
  const seen = new Set<string>();
  return posts.filter((p) => p.answered >= 200 && p.answered < 300 && !seen.has(p.eventId) && seen.add(p.eventId));
}

/** The file sink's records of one topic, in file order, each event once. */
function fileSinkOnce(topic: string): Delivered[] {
  const seen = new Set<string>();
  const out: Delivered[] = [];
  for (const r of fileSink(join(world.dir, '.msgx'), topic)) {
    expect(r.topic).toBe(topic);
    const id = r.headers['msgx-event-id']!;
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ eventId: id, type: r.headers['msgx-event-type']!, key: r.key, value: r.value });
  }
  return out;
}

/**
 * One destination against the model: per flight, the change records carry versions 1..n in
 * order (none lost) and name the messages that made them (`source.msgId`) in mailbox-ID order —
 * versions alone would pass two messages of a flight applied swapped — and the last state record
 * is the modelled flight.
 */
function judge(where: string, changes: Delivered[], states: Delivered[], flids: string[]): void {
  for (const r of changes) expect((JSON.parse(r.value!) as { flid: string }).flid, `${where}: key and flid agree`).toBe(r.key);
  for (const flid of flids) expect(model.expectedSources(flid), `the model knows every mailbox ID of ${flid}`).toBeDefined();
  model.expectChanges(where, changes, flids);
  model.expectLastStates(where, states, flids);
}

const isChange = (r: Delivered) => r.type.startsWith('FLIGHT_');

function judgeBoth(flids: string[]): void {
  const got = receivedOnce();
  judge(
    'webhook',
    got.filter(isChange),
    got.filter((r) => r.type === 'UPSERT'),
    flids,
  );
  judge('file sink', fileSinkOnce('msgx.msg'), fileSinkOnce('msgx.schd'), flids);
  // Fan-out: an event is sent only when every publisher took it, so both saw the same changes.
  expect(new Set(got.filter(isChange).map((r) => r.eventId)), 'the same change events at both destinations').toEqual(
    new Set(fileSinkOnce('msgx.msg').map((r) => r.eventId)),
  );
  expect(signatureProblems, 'every post carried a valid signature').toEqual([]);
}

/** The relay delivers a moment after the flights changed. */
const judgeWhenDelivered = (flids: string[]) =>
  eventually(() => judgeBoth(flids), { timeoutMs: 60_000, what: 'both destinations to show the modelled flights' });

const cli = (...args: string[]) => twinCli(world.twin.base, ...args);

/** The rows of a table the CLI printed (header, dashes, rows; columns aligned). */
function cliTable(out: string): Record<string, string>[] {
  const lines = out.split('\n').filter((l) => l.trim() !== '');
  if (lines[0]?.trim() === '(none)') return [];
  const header = lines[0]!;
  const starts = [...header.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
  return lines
    .slice(2)
    .map((line) => Object.fromEntries(starts.map((c, i) => [c.name, line.slice(c.at, starts[i + 1]?.at ?? line.length).trim()])));
}

// ---- Journeys -----------------------------------------------------------------------------------

describe('delivery journeys: webhook and file sink, outage, dead event and replay', () => {
  const flids = ['JW1', 'JW2', 'JW3'];

  it('webhook and file sink: a day plan and FLOPs from the mailbox and HTTP arrive signed, per flight in order, at both', async () => {
    const plan = schd('DNLD', { seqn: 'dplan', dttm: `${DAY}040000`, opdy: DAY, flights: flids.map((f) => flight(planned(f))) });
    // Several changes per flight in quick succession: batches carry more than one event per flight.
    const fromMailbox = Array.from({ length: 9 }, (_, i) => nextFlop(i, flids[i % flids.length]!));
    const [planId, ...ids] = await world.insert(plan, ...fromMailbox.map((f) => f.text));
    for (const f of flids) model.set(f, { fields: planned(f), version: 1, msgIds: [planId!] });
    fromMailbox.forEach((f, i) => f.apply(ids[i]!));
    for (let i = 20; i < 24; i++) {
      const f = nextFlop(i, flids[i % flids.length]!);
      f.apply(await postToIngress(f.text));
    }
    await settled(flids);
    await judgeWhenDelivered(flids);
    // The receiver refused nothing so far, so nothing was held back.
    expect(posts.filter((p) => p.answered !== 200)).toEqual([]);
  });

  it('receiver outage: it answers 503 for a while; nothing is lost and nothing reordered once it answers again', async () => {
    const before = posts.length;
    outageLeft = 4;
    const changes = Array.from({ length: 6 }, (_, i) => nextFlop(40 + i, flids[i % flids.length]!));
    const ids = await world.insert(...changes.slice(0, 3).map((f) => f.text));
    for (const f of changes.slice(3)) ids.push(await postToIngress(f.text));
    changes.forEach((f, i) => f.apply(ids[i]!));
    await settled(flids);
    await judgeWhenDelivered(flids);
    const during = posts.slice(before);
    // The outage was seen: exactly the four refused posts, and each refused event came again and was taken.
    expect(during.filter((p) => p.answered === 503)).toHaveLength(4);
    // A refused change event came again and was taken; a refused state (UPSERT) may instead be
    // superseded by a newer version of its flight (msgx.schd keeps only the newest per flight).
    const taken = during.filter((p) => p.answered === 200);
    const version = (p: Post) => (JSON.parse(p.value!) as { stateVersion: number }).stateVersion;
    for (const p of during.filter((x) => x.answered === 503)) {
      if (isChange(p))
        expect(
          taken.map((x) => x.eventId),
          `change event ${p.eventId} after its 503`,
        ).toContain(p.eventId);
      else
        expect(
          taken.some((x) => x.type === p.type && x.key === p.key && version(x) >= version(p)),
          `state of ${p.key} v${version(p)} after its 503`,
        ).toBe(true);
    }
    // Nothing overtook a refused event: per flight, the arrival order of every post (refused ones
    // included) never goes back to an older version once a newer one was taken.
    const lastTaken = new Map<string, number>();
    for (const p of during.filter((x) => isChange(x))) {
      const v = (JSON.parse(p.value!) as { stateVersion: number }).stateVersion;
      expect(v, `${p.key}: v${v} posted after v${lastTaken.get(p.key!)} was taken`).toBeGreaterThan(lastTaken.get(p.key!) ?? 0);
      if (p.answered === 200) lastTaken.set(p.key!, v);
    }
  });

  it('dead event and replay: a payload the receiver refuses dies after its attempts; after the fix the operator replays it from the CLI and it arrives once, same event id', async () => {
    const poison = 'JW9';
    refusedKeys.add(poison);
    const adft = schd('ADFT', { seqn: 'dadft', dttm: `${DAY}050000`, opdy: DAY, flights: [flight(planned(poison))] });
    const behind = nextFlop(60, 'JW1');
    const [adftId, behindId] = await world.insert(adft, behind.text);
    model.set(poison, { fields: planned(poison), version: 1, msgIds: [adftId!] });
    behind.apply(behindId!);
    await settled([poison, 'JW1']);

    // The operator sees the dead letters: the flight's change event and its state event.
    const deadOverHttp = async () =>
      (
        (await (await fetch(`${world.twin.base}/admin/dead?kind=event`)).json()) as {
          items: { eventId: number; key: string; lastError: string }[];
        }
      ).items;
    await waitFor(async () => (await deadOverHttp()).filter((r) => r.key === poison).length === 2, {
      timeoutMs: 90_000,
      what: 'both events of the refused flight to die',
    });
    const dead = cliTable(await cli('dead', '--kind', 'event')).filter((r) => r.key === poison);
    expect(dead.map((r) => r.type).sort()).toEqual(['FLIGHT_CREATED', 'UPSERT']);
    for (const r of dead) expect(Number(r.tries)).toBe(MAX_ATTEMPTS);
    const deadIds = dead.map((r) => r.event!);
    // The CLI's table cuts the reason to fit 120 columns (it starts with the publisher's URL); the
    // admin API, and `msgx dead --json`, have it whole: the receiver's 400.
    const full = await deadOverHttp();
    for (const id of deadIds) expect(full.find((x) => String(x.eventId) === id)?.lastError).toMatch(/HTTP 400/);
    // The receiver was asked exactly MAX_ATTEMPTS times for each, and refused each time.
    for (const id of deadIds) expect(posts.filter((p) => p.eventId === id).map((p) => p.answered)).toEqual(Array(MAX_ATTEMPTS).fill(400));
    // No overtaking: the change queued behind the refused one was not posted before it died. Its
    // post is awaited first (it goes out after the death, at some moment), then the order judged.
    const isBehind = (p: Post) =>
      p.key === 'JW1' && isChange(p) && (JSON.parse(p.value!) as { stateVersion: number }).stateVersion === model.get('JW1')!.version;
    await waitFor(() => posts.some((p) => isBehind(p) && p.answered === 200), {
      timeoutMs: 60_000,
      what: 'the change behind the refused event to be taken',
    });
    const lastRefused = posts.reduce((last, p, i) => (p.key === poison && isChange(p) ? i : last), -1);
    expect(lastRefused, 'the refused change was posted').toBeGreaterThanOrEqual(0);
    expect(posts.findIndex(isBehind), 'the change behind the refused event').toBeGreaterThan(lastRefused);

    // The receiver is fixed; the operator looks first, then replays those two.
    refusedKeys.delete(poison);
    const dry = await cli('replay', '--kind', 'event', '--ids', deadIds.join(','), '--dry-run');
    expect(dry).toMatch(/^would move 2$/m);
    // Nothing moved: a change made after the dry run is taken, and nothing of the dead letters
    // came before it (re-queued events would have gone out first, in their target's order).
    const control = nextFlop(61, 'JW2');
    const [controlId] = await world.insert(control.text);
    control.apply(controlId!);
    await waitFor(
      () =>
        posts.some(
          (p) =>
            p.key === 'JW2' &&
            isChange(p) &&
            p.answered === 200 &&
            (JSON.parse(p.value!) as { source: { msgId: number } }).source.msgId === controlId,
        ),
      { timeoutMs: 60_000, what: 'the change made after the dry run to be taken' },
    );
    expect(posts.filter((p) => deadIds.includes(p.eventId) && p.answered === 200)).toEqual([]);
    const moved = await cli('replay', '--kind', 'event', '--ids', deadIds.join(','));
    expect(moved).toMatch(/^moved 2$/m);
    expect(
      cliTable(
        moved
          .split(/\n\s*\n/)[0]!
          .split('\n')
          .slice(1)
          .join('\n'),
      )
        .map((r) => r.eventId)
        .sort(),
    ).toEqual([...deadIds].sort());

    await judgeWhenDelivered([...flids, poison]);
    // Exactly once each, with the event id the dead letter had; and no dead letters are left.
    for (const id of deadIds)
      expect(
        posts.filter((p) => p.eventId === id && p.answered === 200),
        `event ${id}`,
      ).toHaveLength(1);
    expect(
      receivedOnce()
        .filter((r) => r.key === poison)
        .map((r) => r.eventId)
        .sort(),
    ).toEqual([...deadIds].sort());
    expect(cliTable(await cli('dead', '--kind', 'event'))).toEqual([]);
  });
});
