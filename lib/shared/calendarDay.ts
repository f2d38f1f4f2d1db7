/** Days msgx accepts in requests: wide enough for any real operation day, narrow enough to catch typos. */
export const FIRST_YEAR = 2000;
export const LAST_YEAR = 2099;

/**
 * Why `text` is not a calendar day `yyyyMMdd` msgx can ask about, or undefined when it is one:
 * eight digits, a date that exists (no 20260231), between 2000-01-01 and 2099-12-31.
 */
export function calendarDayProblem(text: string): string | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})$/.exec(text);
  if (!m) return 'must be a day yyyyMMdd (eight digits)';
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (y < FIRST_YEAR || y > LAST_YEAR) return `must be a day between ${FIRST_YEAR}0101 and ${LAST_YEAR}1231`;
  const date = new Date(Date.UTC(y, mo - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) return `${text} is not a calendar date`;
  return undefined;
}
