import kafkajs from 'kafkajs';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { dispatcherRole } from '../../lib/jobs/dispatcherRole.ts';
import { runWorker } from '../../lib/jobs/worker.ts';
import { enqueueEvents, type NewEvent } from '../../lib/outbox/enqueue.ts';
import { KafkaPublisher } from '../../lib/outbox/publishers/kafka.ts';
import { buildExactlyOnce } from '../../lib/outbox/publishers/build.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import type { Publisher } from '../../lib/outbox/types.ts';
import { benchContext, freshPg, randomName, serviceUrls } from '../lib/env.ts';
import { observe, topWaits } from '../lib/observe.ts';
import { cpuPerMessage, cpuProbe } from '../lib/procCpu.ts';
import { progress } from '../lib/progress.ts';
import { figure, ratios, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { latency, sleep } from '../lib/stats.ts';

/** A flight-update-sized event (the pump's msgx.msg value is about this size). */
export function eventOf(i: number): NewEvent {
  const flid = String(100000 + (i % 2000));
  return {
    target: 'msg',
    key: flid,
    type: 'FLIGHT_UPDATED',
    flid,
    value: {
      v: 1,
      type: 'FLIGHT_UPDATED',
      flid,
      opdy: '20261129',
      stateVersion: 2 + Math.floor(i / 2000),
      msgId: 10_000 + i,
      changed: { ETOT: '20261129101500' },
      at: '2026-11-29T02:00:00.000Z',
      pad: 'x'.repeat(160),
    },
  };
}

/**
 * Relay throughput: N events queued, then the dispatcher role's step (dispatchOnce, the real
 * KafkaPublisher: idempotent, acks=all, one in flight) until all are SENT, against a plain kafkajs
 * producer with the same settings and batch size (MSGX_DELIVERY_BATCH_SIZE) sending the same
 * records in the same run. Then commit-to-ack: a trickle of single-event transactions
 * (enqueueEvents) with runWorker(dispatcherRole) woken by NOTIFY; the end is the publisher's ack.
 */
export async function relayScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('relay');
  const N = o.quick ? 10_000 : 50_000;
  const trickle = o.quick ? 100 : 500;
  const brokers = serviceUrls().kafkaBrokers;
  const msgx: number[] = [];
  const eos: number[] = [];
  const writesPerBatch: number[] = [];
  const plain: number[] = [];
  const ackP50: number[] = [];
  const ackP99: number[] = [];
  let batch = 100;
  const cpu: number[] = [];
  const waits: Record<string, number> = {};
  // CPU per event by process (µs; this process is the dispatcher, then the plain producer).
  const perEvent = {
    msgxSelf: [] as number[],
    msgxPg: [] as number[],
    msgxBroker: [] as number[],
    plainSelf: [] as number[],
    plainBroker: [] as number[],
  };
  for (let r = 0; r < o.runs; r++) {
    const label = `${r + 1}/${o.runs}`;
    const pg = await freshPg();
    const topicMsg = randomName('bench.msg');
    const topicSchd = randomName('bench.schd');
    const topicPlain = randomName('bench.plain');
    const topicOffsets = randomName('bench.offsets');
    const ctx = benchContext({
      db: pg.db,
      mailbox: new PgMailbox(pg.db),
      env: {
        MSGX_KAFKA_BROKERS: brokers.join(','),
        MSGX_TOPIC_MSG: topicMsg,
        MSGX_TOPIC_SCHD: topicSchd,
        MSGX_TOPIC_OFFSETS: topicOffsets,
      },
    });
    batch = ctx.config.outbox.batchSize;
    const kafka = new kafkajs.Kafka({ clientId: 'bench-plain', brokers, logLevel: kafkajs.logLevel.NOTHING });
    const admin = kafka.admin();
    const publisher = new KafkaPublisher(ctx.config.kafka, { publishTimeoutMs: ctx.config.outbox.publishTimeoutMs });
    try {
      const probe = await cpuProbe({ twinPid: process.pid, pgUrl: pg.url, kafkaBroker: brokers[0]! });
      await ensureTopics(ctx.config, [topicPlain]);
      const events = Array.from({ length: N }, (_, i) => eventOf(i));
      // Neither side is timed while PostgreSQL still digests the inserts (WAL, autovacuum and analyze
      // of the new rows): whichever side ran first paid for it, 6–35 % in probe runs.
      const settle = () => ctx.db.query(`VACUUM ANALYZE msg_event`).then(() => ctx.db.query(`CHECKPOINT`));
      for (let i = 0; i < N; i += 5000) await ctx.db.tx((tx) => enqueueEvents(tx, events.slice(i, i + 5000)));
      await settle();
      p.step(label, `${N} events queued; topics ${topicMsg}, ${topicPlain}`);

      // Rows the relay wrote to the outbox tables as pg_stat counts them: every update, and the inserts
      // of all but msg_event (whose inserts are the writers' and reach the statistics late).
      const rowWrites = async () => {
        await sleep(1_500); // the statistics reach pg_stat_user_tables asynchronously
        const r = await ctx.db.query<{ n: string }>(
          `SELECT coalesce(sum(n_tup_upd + CASE WHEN relname = 'msg_event' THEN 0 ELSE n_tup_ins END), 0)::text AS n
           FROM pg_stat_user_tables WHERE relname IN ('msg_event', 'event_delivery', 'outbox_target', 'outbox_exception', 'outbox_batch')`,
        );
        return Number(r.rows[0]!.n);
      };
      const runMsgx = async (exactlyOnce = false) => {
        const sinks = exactlyOnce ? buildExactlyOnce(ctx.config) : undefined;
        if (exactlyOnce) {
          for (let i = 0; i < N; i += 5000) await ctx.db.tx((tx) => enqueueEvents(tx, events.slice(i, i + 5000)));
          await settle();
        }
        const before = exactlyOnce ? await rowWrites() : 0;
        const obs = await observe(pg.url);
        const cpu0 = probe.read();
        const role = dispatcherRole(ctx, [publisher], sinks ? { exactlyOnce: sinks } : {});
        const tick = p.counter(label, N, 'events (dispatcher)');
        const t0 = performance.now();
        let sent = 0;
        let steps = 0;
        // Like runWorker: step again at once while busy; count only when a step reports idle
        // (and every 20 steps for the progress line), over the open-events index, so counting
        // costs the database next to nothing (a count of SENT rows read the whole table).
        while (sent < N) {
          const s = await role.step({ remainingMs: Number.POSITIVE_INFINITY });
          if (s.busy && ++steps % 20 !== 0) continue;
          const c = await ctx.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM msgx_outbox_open(now())`);
          sent = N - c.rows[0]!.n;
          tick(sent);
        }
        const notSent = await ctx.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM msg_event WHERE msgx_event_state(status, target, event_id, writer_xid, now()) <> 'SENT'`,
        );
        if (notSent.rows[0]!.n > 0) throw new Error(`${notSent.rows[0]!.n} events not SENT`);
        const rate = (N / (performance.now() - t0)) * 1000;
        const used = cpuPerMessage(cpu0, probe.read(), N);
        const seen = await obs.stop();
        if (!exactlyOnce) {
          cpu.push(seen.cpuPct);
          perEvent.msgxSelf.push(used.twin);
          perEvent.msgxPg.push(used.postgres);
          perEvent.msgxBroker.push(used.broker);
        }
        for (const [k, v] of Object.entries(seen.waits)) waits[k] = (waits[k] ?? 0) + v;
        if (sinks) {
          // The N events were appended before `before`: what follows is the relay's own writing.
          writesPerBatch.push(((await rowWrites()) - before) / Math.ceil(N / batch));
          await sinks.close();
        }
        return rate;
      };
      const runPlain = async () => {
        const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
        await producer.connect();
        const messages = events.map((e, i) => ({
          key: e.key!,
          value: JSON.stringify(e.value),
          headers: { 'msgx-event-id': String(i + 1), 'msgx-event-type': e.type },
        }));
        // Warm the connection and metadata like the publisher's first batch does.
        await producer.send({ topic: topicPlain, acks: -1, messages: messages.slice(0, 1) });
        const tick = p.counter(label, N, 'events (plain kafkajs)');
        const t0 = performance.now();
        const cpu0 = probe.read();
        for (let i = 0; i < N; i += batch) {
          await producer.send({ topic: topicPlain, acks: -1, messages: messages.slice(i, i + batch) });
          tick(Math.min(N, i + batch));
        }
        const rate = (N / (performance.now() - t0)) * 1000;
        const used = cpuPerMessage(cpu0, probe.read(), N);
        perEvent.plainSelf.push(used.twin);
        perEvent.plainBroker.push(used.broker);
        await producer.disconnect();
        return rate;
      };
      // Alternate the order between runs so neither side always gets the warmer broker.
      if (r % 2 === 0) {
        msgx.push(await runMsgx());
        plain.push(await runPlain());
      } else {
        plain.push(await runPlain());
        msgx.push(await runMsgx());
      }
      eos.push(await runMsgx(true));
      p.step(
        label,
        `dispatcher ${msgx.at(-1)!.toFixed(0)} events/s (exactly once ${eos.at(-1)!.toFixed(0)}), plain producer ${plain.at(-1)!.toFixed(0)} events/s; ${writesPerBatch.at(-1)!.toFixed(1)} row writes per batch`,
      );

      // Commit-to-ack on a warm relay.
      const acks = new Map<number, number>();
      const timed: Publisher = {
        name: publisher.name,
        async publish(records, signal) {
          const res = await publisher.publish(records, signal);
          const at = performance.now();
          records.forEach((rec, i) => res[i]?.ok && !acks.has(rec.eventId) && acks.set(rec.eventId, at));
          return res;
        },
        close: () => publisher.close(),
      };
      const stop = new AbortController();
      const worker = runWorker(ctx, { ...dispatcherRole(ctx, [timed]), signal: stop.signal });
      const starts = new Map<number, number>();
      const tick = p.counter(label, trickle, 'trickle events, one every 10 ms');
      for (let i = 0; i < trickle + 20; i++) {
        const t0 = performance.now();
        const [id] = await ctx.db.tx((tx) => enqueueEvents(tx, [eventOf(i)]));
        if (i >= 20) starts.set(id!, t0);
        await sleep(10);
        if (i >= 20) tick(i - 19);
      }
      const deadline = Date.now() + 15_000;
      while ([...starts.keys()].some((id) => !acks.has(id)) && Date.now() < deadline) await sleep(20);
      stop.abort();
      await worker;
      const lat = [...starts].filter(([id]) => acks.has(id)).map(([id, t0]) => acks.get(id)! - t0);
      if (lat.length < starts.size) throw new Error(`${starts.size - lat.length} trickle events never acknowledged`);
      const l = latency(lat);
      ackP50.push(l.p50);
      ackP99.push(l.p99);
      p.step(label, `commit-to-ack p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms`);
      await admin.connect();
      await admin.deleteTopics({ topics: [topicMsg, topicSchd, topicPlain, topicOffsets] }).catch(() => {});
    } finally {
      await publisher.close().catch(() => {});
      await admin.disconnect().catch(() => {});
      await pg.drop();
    }
  }
  return {
    scenario: 'relay',
    title: `Relay: ${N.toLocaleString('en-US')} events to Kafka (acks=all, idempotent, one in flight)`,
    figures: [
      figure('relay.msgx', 'msgx dispatcher (dispatcherRole step)', 'events/s', msgx, {
        target: { op: '>=', value: 10_000 },
        headline: true,
      }),
      figure('relay.plain', `plain kafkajs producer, batches of ${batch}`, 'events/s', plain, { headline: true }),
      figure('relay.eos', 'msgx dispatcher, exactly once (a Kafka transaction per batch with its cursor)', 'events/s', eos, {
        headline: true,
      }),
      figure('relay.eos.ratio', 'exactly once / at least once', 'x', ratios(eos, msgx), {}),
      figure('relay.writes', 'PostgreSQL row writes per batch of the relay (exactly once, happy path)', 'rows', writesPerBatch, {
        better: 'lower',
      }),
      figure('relay.cpu', 'dispatcher process CPU while sending', '%', cpu, { better: 'lower' }),
      figure('relay.ratio', 'msgx dispatcher / plain producer', 'x', ratios(msgx, plain), {
        target: { op: '>=', value: 0.8 },
        headline: true,
      }),
      figure('relay.cpu.msgx.self', 'CPU per event: the dispatcher process (at least once)', 'µs', perEvent.msgxSelf, { better: 'lower' }),
      figure('relay.cpu.plain.self', 'CPU per event: the plain producer process', 'µs', perEvent.plainSelf, { better: 'lower' }),
      figure('relay.cpu.msgx.pg', 'CPU per event: PostgreSQL, while the dispatcher sends', 'µs', perEvent.msgxPg, {
        target: { op: '<=', value: 5 },
      }),
      figure('relay.cpu.msgx.broker', 'CPU per event: the broker, from the dispatcher', 'µs', perEvent.msgxBroker, { better: 'lower' }),
      figure('relay.cpu.plain.broker', 'CPU per event: the broker, from the plain producer', 'µs', perEvent.plainBroker, {
        better: 'lower',
      }),
      figure('relay.ack.p50', 'commit-to-ack p50 (enqueueEvents tx → publisher ack)', 'ms', ackP50, {
        target: { op: '<', value: 20 },
        headline: true,
      }),
      figure('relay.ack.p99', 'commit-to-ack p99', 'ms', ackP99, { target: { op: '<', value: 100 }, headline: true }),
    ],
    notes: [`while the dispatcher sends, PG session samples: ${topWaits(waits)}; dispatcher process CPU ${cpu.join('/')}% of one core.`],
    meta: { pgWaitSamples: waits, events: N, trickle, batchSize: batch, partitions: 6 },
  };
}
