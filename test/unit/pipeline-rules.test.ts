import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { backoffMs } from '../../lib/shared/backoff.ts';
import { record } from '../../lib/pipeline/group.ts';
import type { OpenRow } from '../../lib/pipeline/procState.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import type { ErrorClass } from '../../lib/shared/errors.ts';
import { localDay, localTimeToDate, formatLocalTime } from '../../lib/shared/time.ts';

const row = (over: Partial<OpenRow> = {}): OpenRow => ({
  msg_id: 1,
  status: 'PENDING',
  attempts: 0,
  next_attempt_at: new Date(0),
  first_attempt_at: null,
  identity_key: null,
  raw_text: null,
  error_class: null,
  error_detail: null,
  ...over,
});

describe('processing backoff and exhaustion', () => {
  const config = loadConfig({});
  const item = { msgId: 1, rawText: 'x', error: undefined, decoded: undefined } as never;
  /** What record() makes of a message whose first attempt was at 00:00:00 and whose next one, after `attempts`, fails at `now`. */
  const failing = (attempts: number, now: Date, errorClass: ErrorClass, detail: string) =>
    record(
      row({ attempts, first_attempt_at: new Date('2026-11-29T00:00:00Z') }),
      { status: 'FAILED', errorClass, detail },
      { item, identity: 'id', startedAt: now, finishedAt: now },
      config.pipeline,
    );

  it('backs off 1, 2, 4, 8, 16 s capped at 60 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((a) => backoffMs(a, 1000, 60_000))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
    ]);
  });

  it('a failure under the limit is FAILED with the next attempt after its backoff', () => {
    const now = new Date('2026-11-29T00:00:10Z');
    const r = failing(2, now, 'INFRA', 'down');
    expect(r).toMatchObject({ status: 'FAILED', attempt: 3, errorClass: 'INFRA', errorDetail: 'down' });
    expect(r.nextAttemptAt.getTime() - now.getTime()).toBe(4000);
  });

  it('the fifth failure is DEAD(EXHAUSTED) naming the last class', () => {
    const now = new Date('2026-11-29T00:01:00Z');
    const r = failing(4, now, 'CODEC_ERROR', 'bad GATE');
    expect(r).toMatchObject({ status: 'DEAD', errorClass: 'EXHAUSTED', errorDetail: 'CODEC_ERROR: bad GATE (after 5 attempts)' });
  });

  it('the head deadline counts from the first attempt, not the last update', () => {
    const now = new Date('2026-11-29T00:10:00Z');
    const r = failing(1, now, 'INFRA', 'x');
    expect(r).toMatchObject({ status: 'DEAD', errorClass: 'EXHAUSTED' });
    expect(r.errorDetail).toMatch(/head deadline passed/);
  });
});

describe('airport local time', () => {
  it('reads yyyyMMddHHmmss in the configured zone', () => {
    expect(localTimeToDate('20261129083000', 'Asia/Shanghai').toISOString()).toBe('2026-11-29T00:30:00.000Z');
    expect(localTimeToDate('20260329023000', 'Europe/Berlin').toISOString()).toBe('2026-03-29T01:30:00.000Z');
    expect(() => localTimeToDate('20261331000000', 'Asia/Shanghai')).toThrow(/not a valid date/);
  });
  it('reads every wall time right across daylight-saving changes, half-hour and quarter-hour zones included', () => {
    // Independent oracle: a fresh formatter's wall time of each instant, read back by msgx, must give
    // that wall time again (and the instant itself where the wall time is not repeated by a fall-back).
    const zones = ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kathmandu', 'Pacific/Chatham', 'UTC'];
    const days = ['2026-03-08', '2026-03-29', '2026-04-05', '2026-09-27', '2026-10-04', '2026-10-25', '2026-11-01'];
    for (const zone of zones) {
      const wall = new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      });
      const text = (at: number) => {
        const p = Object.fromEntries(wall.formatToParts(new Date(at)).map((x) => [x.type, x.value]));
        return `${p.year}${p.month}${p.day}${p.hour}${p.minute}${p.second}`;
      };
      for (const day of days) {
        const from = Date.parse(`${day}T00:00:00Z`) - 86_400_000;
        for (let at = from; at < from + 2 * 86_400_000; at += 5 * 60_000) {
          const t = text(at);
          const read = localTimeToDate(t, zone).getTime();
          expect(text(read), `${zone} ${t}`).toBe(t);
          if (text(at - 3_600_000) !== t && text(at + 3_600_000) !== t && text(at - 1_800_000) !== t && text(at + 1_800_000) !== t)
            expect(read, `${zone} ${t}`).toBe(at);
        }
      }
    }
  });
  it('formats and gives the local day', () => {
    const at = new Date('2026-11-29T17:00:00Z');
    expect(localDay(at, 'Asia/Shanghai')).toBe('20261130');
    expect(formatLocalTime(at, 'Asia/Shanghai')).toBe('20261130010000');
  });
});

describe('fake clock', () => {
  it('wakes sleepers only when time is advanced past their deadline', async () => {
    const clock = new FakeClock('2026-11-29T00:00:00Z');
    let woke = false;
    const p = clock.sleep(1000).then(() => (woke = true));
    clock.advance(999);
    await Promise.resolve();
    expect(woke).toBe(false);
    clock.advance(1);
    await p;
    expect(woke).toBe(true);
    expect(clock.now().toISOString()).toBe('2026-11-29T00:00:01.000Z');
  });
});
