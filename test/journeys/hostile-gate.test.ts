import mysql from 'mysql2/promise';
import { expect, it } from 'vitest';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { eventually, type Fields, FlightModel, fromKafka, insertOn, useJourney } from '../helpers/journey.ts';
import { readTopicToEnd } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';

/**
 * Journey: hostile and heavy messages ahead of ordinary traffic, in the mailbox (INSERTed by
 * "another system") and through POST /cminmsgs/send — a 1 MB message, comment bombs, references
 * XML forbids, unknown message types that hold the head for their retries. Judged from outside
 * only: the read API and a Kafka consumer against a model built from what was sent; the HTTP
 * statuses of every answer (ingress, /health, read API polled all along) are 200 or 4xx, never 5xx.
 * The unknown types hold the head only for the bounded retry rule (MSGX_MAX_ATTEMPTS attempts),
 * then end DEAD(EXHAUSTED) and the ordinary messages behind them are applied.
 * Breaking the scan (a `<!--` inside CDATA read as a comment) turns the CDATA bomb into a refusal
 * and the model's remark is never shown; removing decodeText leaves "A &amp; B" in the read API.
 */
const DAY = '20261129';
const FLIDS = ['H301', 'H302', 'H303'];
const MIB = 1024 * 1024;

const model = new FlightModel();

const world = useJourney('gate', {
  mailbox: true,
  kafka: { partitions: 2 },
  env: () => ({
    // The retry rule, shortened: 3 attempts 200 ms and 400 ms apart, then DEAD(EXHAUSTED).
    MSGX_MAX_ATTEMPTS: '3',
    MSGX_BACKOFF_INITIAL: '200ms',
    MSGX_BACKOFF_MAX: '1s',
  }),
});

const meta = (seqn: string, type: string, styp?: string) =>
  `<META><SNDR>GATE</SNDR><RCVR>MSGX</RCVR><SEQN>${seqn}</SEQN><DTTM>${DAY}090000</DTTM><TYPE>${type}</TYPE>${styp ? `<STYP>${styp}</STYP>` : ''}</META>`;
const remarkFlop = (seqn: string, flid: string, remarkXml: string) =>
  `<MSG>${meta(seqn, 'FLOP', 'UPDT')}<FLOP><FLIGHT><FLID>${flid}</FLID>${remarkXml}</FLIGHT></FLOP></MSG>`;
/** A FLOP whose remark fills the message to `bytes`. */
const bigFlop = (seqn: string, flid: string, bytes: number) => {
  const shell = remarkFlop(seqn, flid, '<XREM></XREM>');
  return { text: remarkFlop(seqn, flid, `<XREM>${'r'.repeat(bytes - shell.length)}</XREM>`), remark: 'r'.repeat(bytes - shell.length) };
};
/** An ignored message type (LDM) of `bytes`: decoded whole, then SKIPPED. */
const ldmOf = (seqn: string, bytes: number) => {
  const shell = `<MSG>${meta(seqn, 'LDM')}<LDM><X></X></LDM></MSG>`;
  return `<MSG>${meta(seqn, 'LDM')}<LDM><X>${'l'.repeat(bytes - shell.length)}</X></LDM></MSG>`;
};
const bombCount = 60_000;
const unknownType = (seqn: string, type: string) => `<MSG>${meta(seqn, type)}<${type}><X>1</X></${type}></MSG>`;

it('hostile and heavy messages ahead of ordinary traffic: ordinary traffic flows, every answer is 200 or 4xx', async () => {
  // Every HTTP answer of the journey, with what asked for it.
  const answers: { what: string; status: number }[] = [];
  const call = async (what: string, path: string, init?: RequestInit) => {
    const res = await fetch(`${world.twin.base}${path}`, init);
    answers.push({ what, status: res.status });
    return res;
  };
  const post = (what: string, body: string) =>
    call(what, '/cminmsgs/send', { method: 'POST', headers: { 'content-type': 'application/xml' }, body });
  // Readers keep asking all along; each answer is recorded.
  let polling = true;
  const poller = (async () => {
    while (polling) {
      await call('health', '/health').then((r) => r.arrayBuffer());
      await call('read', `/v1/flights?day=${DAY}`).then((r) => r.arrayBuffer());
      await new Promise((r) => setTimeout(r, 50));
    }
  })();

  const c = await mysql.createConnection({ uri: world.my.url });
  const insert = (text: string) => insertOn(c, text);
  const dead = new Map<number, string>(); // mailbox ID → the class it must end DEAD with
  try {
    await insert(
      schd('DNLD', {
        seqn: 'gate-plan',
        dttm: `${DAY}050000`,
        opdy: DAY,
        flights: FLIDS.map((f) => flight({ FLID: f, OPDY: DAY, STAT: 'SCH' })),
      }),
    );
    for (const f of FLIDS) model.set(f, { fields: { FLID: f, OPDY: DAY, STAT: 'SCH' }, version: 1 });

    // ---- Ahead of ordinary traffic, in the mailbox ----
    // 1 MB: an ignored type (SKIPPED, no flight changes), and a half-megabyte remark on a flight.
    // (A flight whose JSON state passes the broker's message.max.bytes, 1 MiB by default, could not
    // be published at all: a remark of a whole megabyte is for the read API only.)
    await insert(ldmOf('gate-ldm-mb', MIB - 64));
    const big = bigFlop('gate-big-mb', 'H301', MIB / 2);
    await insert(big.text);
    model.apply('H301', { XREM: big.remark });
    const bomb = '<!--'.repeat(bombCount);
    await insert(remarkFlop('gate-bomb-mb', 'H302', `<XREM><![CDATA[${bomb}]]></XREM>`));
    model.apply('H302', { XREM: bomb });
    dead.set(await insert(remarkFlop('gate-unclosed-mb', 'H303', `<XREM>${'<!--'.repeat(bombCount)}</XREM>`)), 'MALFORMED');
    dead.set(await insert(remarkFlop('gate-undeclared-mb', 'H303', '<XREM>&x;</XREM>')), 'MALFORMED');
    dead.set(await insert(remarkFlop('gate-nul-ref-mb', 'H303', '<XREM>&#x0;</XREM>')), 'MALFORMED');
    for (const t of ['ZZA', 'ZZB']) dead.set(await insert(unknownType(`gate-${t}-mb`, t)), 'EXHAUSTED');
    // Ordinary traffic behind them.
    for (let i = 0; i < 6; i++) {
      const flid = FLIDS[i % FLIDS.length]!;
      const etot = `${DAY}1${i}0000`;
      await insert(
        flop('ETOT', { seqn: `gate-ord-mb-${i}`, dttm: `${DAY}0900${String(i).padStart(2, '0')}` }, flight({ FLID: flid, ETOT: etot })),
      );
      model.apply(flid, { ETOT: etot });
    }
    // References and attributes: the reader gets what XML means.
    await insert(remarkFlop('gate-xml-mb', 'H303', '<XREM lang="zh">A &amp; B &#x4E2D;</XREM>'));
    model.apply('H303', { XREM: { '@lang': 'zh', '#text': 'A & B 中' } } as unknown as Fields);

    // ---- The same through the ingress ----
    const viaHttp: [string, string, number][] = [
      ['1 MB accepted', ldmOf('gate-ldm-http', MIB - 64), 200],
      ['half a megabyte accepted', bigFlop('gate-big-http', 'H302', MIB / 2).text, 200],
      ['over the limit', bigFlop('gate-over-http', 'H302', MIB + 64).text, 413],
      ['comment bomb in CDATA', remarkFlop('gate-bomb-http', 'H301', `<XREM><![CDATA[${bomb}x]]></XREM>`), 200],
      ['comment bomb unclosed', remarkFlop('gate-unclosed-http', 'H301', `<XREM>${'<!--'.repeat(bombCount)}</XREM>`), 400],
      ['undeclared entity', remarkFlop('gate-undeclared-http', 'H301', '<XREM>&x;</XREM>'), 400],
      ['surrogate reference', remarkFlop('gate-surrogate-http', 'H301', '<XREM>&#xD800;</XREM>'), 400],
      [']]> in text', remarkFlop('gate-cdata-end-http', 'H301', '<XREM>a ]]> b</XREM>'), 400],
      ['unknown type', unknownType('gate-ZZC-http', 'ZZC'), 200],
    ];
    for (const [what, text, status] of viaHttp) {
      const res = await post(what, text);
      const body = await res.text();
      expect(res.status, `${what}: ${body.slice(0, 200)}`).toBe(status);
      if (status >= 400) expect((JSON.parse(body) as { detail: string }).detail, what).toBeTruthy();
      if (what === 'unknown type') dead.set(Number(body), 'EXHAUSTED');
    }
    model.apply('H302', { XREM: bigFlop('gate-big-http', 'H302', MIB / 2).remark });
    model.apply('H301', { XREM: `${bomb}x` });
    for (let i = 0; i < 4; i++) {
      const flid = FLIDS[i % FLIDS.length]!;
      const eldt = `${DAY}2${i}0000`;
      const res = await post(
        'ordinary',
        flop('ELDT', { seqn: `gate-ord-http-${i}`, dttm: `${DAY}1000${String(i).padStart(2, '0')}` }, flight({ FLID: flid, ELDT: eldt })),
      );
      expect(res.status).toBe(200);
      model.apply(flid, { ELDT: eldt });
    }

    // ---- Judged from outside ----
    await model.settled(world.twin.base, FLIDS);
    for (const flid of FLIDS) {
      const got = (await (await call('read', `/v1/flights/${flid}`)).json()) as Record<string, unknown>;
      expect(got, flid).toMatchObject({ ...model.get(flid)!.fields, stateVersion: model.get(flid)!.version });
    }
    // The consumer: msgx.schd's last record per flight carries the modelled state.
    await eventually(
      async () =>
        model.expectLastStates(
          'msgx.schd',
          (await readTopicToEnd(world.brokers, world.topics.schd, { timeoutMs: 20_000 })).map(fromKafka),
          FLIDS,
        ),
      { timeoutMs: 60_000, what: 'msgx.schd to carry every modelled version' },
    );
    // What was refused after it was stored ends DEAD with its class, named in the admin API.
    await waitFor(
      async () => {
        const res = await call('dead', '/admin/dead?kind=proc');
        const body = (await res.json()) as { items: { msg_id: number | string; status: string; error_class: string | null }[] };
        const got = new Map(body.items.filter((d) => d.status === 'DEAD').map((d) => [Number(d.msg_id), d.error_class]));
        return [...dead].every(([id, cls]) => got.get(id) === cls);
      },
      { timeoutMs: 60_000, what: 'every hostile message stored to end DEAD with its class' },
    );
  } finally {
    polling = false;
    await poller;
    await c.end();
  }
  expect(answers.filter((a) => a.what === 'health').length).toBeGreaterThan(0);
  expect(answers.filter((a) => a.status >= 500)).toEqual([]);
  expect(answers.filter((a) => a.status !== 200 && (a.status < 400 || a.status >= 500))).toEqual([]);
}, 600_000);
