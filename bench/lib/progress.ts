/** One line per scenario step on stderr, e.g. `[pump 2/3] 6,200/10,000 msgs`. Nothing fancy. */

const fmt = new Intl.NumberFormat('en-US');
export const n = (x: number) => fmt.format(Math.round(x));

export function progress(scenario: string) {
  const started = Date.now();
  return {
    step(label: string, text: string) {
      const secs = ((Date.now() - started) / 1000).toFixed(1);
      process.stderr.write(`[${scenario}${label ? ` ${label}` : ''}] ${text}  (+${secs}s)\n`);
    },
    /** A throttled counter: prints at most every `everyMs`. */
    counter(label: string, total: number, unit: string, everyMs = 2000) {
      let last = 0;
      return (done: number, force = false) => {
        const now = Date.now();
        if (!force && now - last < everyMs && done < total) return;
        last = now;
        const secs = ((now - started) / 1000).toFixed(1);
        process.stderr.write(`[${scenario}${label ? ` ${label}` : ''}] ${n(done)}/${n(total)} ${unit}  (+${secs}s)\n`);
      };
    },
  };
}
export type Progress = ReturnType<typeof progress>;
