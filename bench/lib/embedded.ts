import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { flight, flop, schd } from '../../test/fixtures/messages/build.ts';
import { call, freePort } from './http.ts';
import { sleep } from './stats.ts';
import { cpuSeconds, peakRssMiB, startTwin, stopTwin } from './twin.ts';

/** The twin as `npm start` runs it with nothing set: PGlite, mailbox tables in it, file sink. */
export const EMBEDDED_ENV = { MSGX_PG_URL: '', MSGX_MAILBOX_URL: '', MSGX_KAFKA_BROKERS: '', MSGX_LOG_LEVEL: 'WARN' };

export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

export interface EmbeddedStart {
  /** VmRSS once /health first answers 200, first start (the data directory created). */
  firstRss: number;
  firstPeak: number;
  /** The same on the second start on the same directory. */
  againRss: number;
  againPeak: number;
}

/** Starts the embedded twin on a fresh data directory, stops it, starts it again: RSS of each. */
export async function embeddedStart(): Promise<EmbeddedStart> {
  const dataDir = mkdtempSync(join(tmpdir(), 'msgx-bench-embedded-'));
  try {
    const once = async () => {
      const port = await freePort();
      const twin = await startTwin({ ...EMBEDDED_ENV, MSGX_DATA_DIR: dataDir, MSGX_HTTP_PORT: String(port) }, port);
      await sleep(1000); // the roles' first rounds
      const r = { rss: rssMiB(twin.pid!), peak: peakRssMiB(twin.pid!) };
      await stopTwin(twin);
      return r;
    };
    const first = await once();
    const again = await once();
    return { firstRss: first.rss, firstPeak: first.peak, againRss: again.rss, againPeak: again.peak };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

export interface EmbeddedLoad {
  rps: number;
  errors: number;
  peakRss: number;
  cpu: number;
  processedWithin: boolean;
}

/**
 * `clients` closed-loop clients POST /cminmsgs/send (one FLOP each, changing a flight of a day
 * plan loaded first) for `seconds` while the twin processes them: acknowledged requests per second.
 */
export async function embeddedLoad(o: { seconds: number; clients: number }): Promise<EmbeddedLoad> {
  const dataDir = mkdtempSync(join(tmpdir(), 'msgx-bench-embedded-'));
  const port = await freePort();
  const twin = await startTwin({ ...EMBEDDED_ENV, MSGX_DATA_DIR: dataDir, MSGX_HTTP_PORT: String(port) }, port);
  const headers = { 'content-type': 'application/xml' };
  const DAY = '20261129';
  const flights = Array.from({ length: 500 }, (_, i) => String(700_000 + i));
  try {
    const plan = schd('DNLD', {
      seqn: 1,
      dttm: `${DAY}080000`,
      opdy: DAY,
      flights: flights.map((f) => flight({ FLID: f, OPDY: DAY, AWCD: 'CZ', FLNO: f })),
    });
    const p = await call(port, 'POST', '/cminmsgs/send', plan, headers);
    if (p.status !== 200) throw new Error(`day plan: ${p.status} ${p.body}`);
    let seqn = 2;
    let ok = 0;
    let errors = 0;
    const cpu0 = cpuSeconds(twin.pid!);
    const t0 = performance.now();
    const until = t0 + o.seconds * 1000;
    await Promise.all(
      Array.from({ length: o.clients }, async () => {
        while (performance.now() < until) {
          const n = seqn++;
          const body = flop(
            'ETOT',
            { seqn: n },
            flight({ FLID: flights[n % flights.length]!, ETOT: `${DAY}${String(100000 + (n % 5000)).padStart(6, '0')}` }),
          );
          const r = await call(port, 'POST', '/cminmsgs/send', body, headers).catch(() => null);
          if (r?.status === 200) ok++;
          else errors++;
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    const cpu = ((cpuSeconds(twin.pid!) - cpu0) / secs) * 100;
    // Until the backlog is processed (bounded): the peak includes the pump's work.
    let processedWithin = false;
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      const s = await call(port, 'GET', '/admin/stats').catch(() => null);
      const body = s?.status === 200 ? (JSON.parse(s.body) as { pipeline?: { backlog?: number } }) : undefined;
      if (body?.pipeline?.backlog === 0) {
        processedWithin = true;
        break;
      }
      await sleep(500);
    }
    return { rps: ok / secs, errors, peakRss: peakRssMiB(twin.pid!), cpu, processedWithin };
  } finally {
    await stopTwin(twin);
    rmSync(dataDir, { recursive: true, force: true });
  }
}
