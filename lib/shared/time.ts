/**
 * Wire times are airport local time `yyyyMMddHHmmss` (or `yyyyMMddHHmm`, `yyyyMMdd`) in an IANA
 * zone. Converting with Intl keeps daylight-saving rules right for any configured zone.
 */
export function localTimeToDate(text: string, timeZone: string): Date {
  // Wire times repeat a lot (schedules, DTTM of a burst): remember recent conversions.
  const key = `${timeZone}|${text}`;
  const hit = recent.get(key);
  if (hit !== undefined) return new Date(hit);
  const at = convert(text, timeZone);
  if (recent.size >= 10_000) recent.clear();
  recent.set(key, at.getTime());
  return at;
}

const recent = new Map<string, number>();

function convert(text: string, timeZone: string): Date {
  const m = /^(\d{4})(\d{2})(\d{2})(?:(\d{2})(\d{2})(\d{2})?)?$/.exec(text);
  if (!m) throw new Error(`"${text}" is not yyyyMMddHHmmss`);
  const [y, mo, d, h = '0', mi = '0', s = '0'] = m.slice(1).map((v): string => v ?? '0');
  const asUtc = Date.UTC(+y!, +mo! - 1, +d!, +h, +mi, +s);
  const check = new Date(asUtc);
  if (check.getUTCMonth() !== +mo! - 1 || check.getUTCDate() !== +d! || +h > 23 || +mi > 59 || +s > 59)
    throw new Error(`"${text}" is not a valid date and time`);
  // The zone's offset at that wall time; a second pass settles DST edges.
  let guess = asUtc - offsetMs(asUtc, timeZone);
  guess = asUtc - offsetMs(guess, timeZone);
  return new Date(guess);
}

// Building an Intl.DateTimeFormat costs far more than using one: keep one per zone.
const formatters = new Map<string, Intl.DateTimeFormat>();
function wallClock(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The zone's offset from UTC at an instant, in ms. */
function offsetMs(utcMs: number, timeZone: string): number {
  if (timeZone === 'UTC' || timeZone === 'Etc/UTC') return 0;
  // formatToParts is the dear part of a conversion, and offsets change only at transitions, which
  // since the 1970s fall on quarter hours in every zone: one look-up per zone and quarter hour, kept
  // when the quarter's first and last second agree (a quarter holding a transition is not kept).
  const quarter = Math.floor(utcMs / QUARTER_MS);
  let zone = offsets.get(timeZone);
  if (!zone) offsets.set(timeZone, (zone = new Map()));
  const known = zone.get(quarter);
  if (known !== undefined) return known;
  const start = computeOffsetMs(quarter * QUARTER_MS, timeZone);
  const end = computeOffsetMs((quarter + 1) * QUARTER_MS - 1000, timeZone);
  if (start !== end) return computeOffsetMs(utcMs, timeZone);
  if (zone.size >= 10_000) zone.clear();
  zone.set(quarter, start);
  return start;
}

const QUARTER_MS = 15 * 60_000;
const offsets = new Map<string, Map<number, number>>();

function computeOffsetMs(utcMs: number, timeZone: string): number {
  const parts = wallClock(timeZone).formatToParts(new Date(utcMs));
  const get = (t: string) => Number(parts.find((p) => p.type === t)?.value);
  const wall = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return wall - Math.floor(utcMs / 1000) * 1000;
}

/** The airport-local calendar day `yyyyMMdd` of an instant. */
export function localDay(at: Date, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(at);
  return parts.replaceAll('-', '');
}

/** `yyyyMMddHHmmss` in airport local time (outbound messages). */
export function formatLocalTime(at: Date, timeZone: string): string {
  const parts = wallClock(timeZone).formatToParts(at);
  const get = (t: string) => parts.find((p) => p.type === t)?.value ?? '00';
  return `${get('year')}${get('month')}${get('day')}${get('hour')}${get('minute')}${get('second')}`;
}
