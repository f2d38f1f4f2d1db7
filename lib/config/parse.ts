import { z } from 'zod';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** Parses `500ms`, `30s`, `4m`, `1h` (a bare number is milliseconds). */
export function parseDuration(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) throw new Error(`"${text}" is not a duration (use e.g. 500ms, 30s, 4m, 1h)`);
  return Math.round(Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as keyof typeof UNIT_MS]);
}

export const positiveInt = (dflt: number) => z.coerce.number().int().positive().default(dflt);

/**
 * A duration setting. Intervals, timeouts and backoffs must be positive (a zero poll
 * interval is a busy loop); only a setting whose zero has a documented meaning passes `{ zero: true }`.
 */
export const duration = (dflt: string, opts: { zero?: boolean } = {}) =>
  z
    .string()
    .default(dflt)
    .transform((v, ctx) => {
      try {
        const ms = parseDuration(v);
        if (ms <= 0 && !opts.zero) throw new Error(`"${v}" must be a positive duration (e.g. 500ms, 30s)`);
        return ms;
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
        return z.NEVER;
      }
    });

/**
 * A comma list of durations, each positive; with `{ zeroFirst: true }` the first may be `0s` (a
 * schedule whose first step is "at once"), no later one — and never the last, even when it is
 * also the first: the last wait is the ack window, and a window of zero is DEAD on sending.
 */
export const durationList = (dflt: string, opts: { zeroFirst?: boolean } = {}) =>
  z
    .string()
    .default(dflt)
    .transform((v, ctx) => {
      try {
        const list = v.split(',').map(parseDuration);
        if (list.length === 0) throw new Error('the list is empty');
        const last = list.length - 1;
        const zero = list.findIndex((ms, i) => ms <= 0 && !(i === 0 && i < last && opts.zeroFirst));
        if (zero >= 0)
          throw new Error(
            `item ${zero + 1} ("${v.split(',')[zero]!.trim()}") must be a positive duration` +
              (!opts.zeroFirst
                ? ''
                : zero === last
                  ? ' (the last wait is the ack window: it cannot be zero)'
                  : ' (only the first may be 0s)'),
          );
        return list;
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
        return z.NEVER;
      }
    });

/** A party code of the wire META (SNDR, RCVR): letters, digits, '_', '-' or '.', 1 to 32. */
export const wireCode = (dflt: string) =>
  z
    .string()
    .default(dflt)
    .refine((v) => /^[A-Za-z0-9_.-]{1,32}$/.test(v), 'must be a wire party code: 1 to 32 letters, digits, "_", "-" or "."');

export const commaList = () =>
  z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    );

export const flag = (dflt = false) =>
  z
    .enum(['1', '0', 'true', 'false', 'yes', 'no', 'on', 'off', ''])
    .optional()
    .transform((v) => (v === undefined || v === '' ? dflt : ['1', 'true', 'yes', 'on'].includes(v)));
