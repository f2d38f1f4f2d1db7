import type { Figure, ScenarioResult } from './result.ts';
import { fmtTarget, fmtValue } from './table.ts';

/** Hand-written SVG of the headline figures: horizontal bars with min–max whiskers, no deps. */

interface Bar {
  label: string;
  value: number;
  min: number;
  max: number;
  text: string;
  color: string;
}

interface Panel {
  title: string;
  bars: Bar[];
  /** Draw a reference line at this value (e.g. 1 = target met). */
  refLine?: { at: number; label: string };
  scaleMax?: number;
}

const esc = (s: string) => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
const GREEN = '#2e7d32';
const RED = '#c62828';
const BLUE = '#1565c0';
const GREY = '#757575';

const W = 1120;
const LABEL_W = 430;
const BAR_W = 400;
const BAR_H = 16;
const GAP = 8;

function renderPanel(p: Panel, y0: number): { svg: string; height: number } {
  const max = p.scaleMax ?? Math.max(1e-9, ...p.bars.map((b) => Math.max(b.max, b.value)), p.refLine?.at ?? 0) * 1.08;
  const x = (v: number) => LABEL_W + Math.max(0, Math.min(1, v / max)) * BAR_W;
  let s = `<text x="10" y="${y0 + 16}" font-size="14" font-weight="bold">${esc(p.title)}</text>`;
  let y = y0 + 28;
  for (const b of p.bars) {
    // ~6.5 px a character at 12 px: a longer label would run off the left edge (the table has it whole).
    const label = b.label.length > 64 ? `${b.label.slice(0, 63)}…` : b.label;
    s += `<text x="${LABEL_W - 8}" y="${y + BAR_H - 4}" font-size="12" text-anchor="end">${esc(label)}</text>`;
    s += `<rect x="${LABEL_W}" y="${y}" width="${(x(b.value) - LABEL_W).toFixed(1)}" height="${BAR_H}" fill="${b.color}" opacity="0.85"/>`;
    if (b.max > b.min) {
      const cy = y + BAR_H / 2;
      s += `<line x1="${x(b.min).toFixed(1)}" y1="${cy}" x2="${x(b.max).toFixed(1)}" y2="${cy}" stroke="#000" stroke-width="1.2"/>`;
      s += `<line x1="${x(b.min).toFixed(1)}" y1="${cy - 4}" x2="${x(b.min).toFixed(1)}" y2="${cy + 4}" stroke="#000"/>`;
      s += `<line x1="${x(b.max).toFixed(1)}" y1="${cy - 4}" x2="${x(b.max).toFixed(1)}" y2="${cy + 4}" stroke="#000"/>`;
    }
    s += `<text x="${LABEL_W + BAR_W + 8}" y="${y + BAR_H - 4}" font-size="12">${esc(b.text)}</text>`;
    y += BAR_H + GAP;
  }
  if (p.refLine) {
    const rx = x(p.refLine.at).toFixed(1);
    s += `<line x1="${rx}" y1="${y0 + 24}" x2="${rx}" y2="${y - GAP + 4}" stroke="#000" stroke-dasharray="4 3"/>`;
    s += `<text x="${rx}" y="${y + 8}" font-size="11" text-anchor="middle">${esc(p.refLine.label)}</text>`;
    y += 12;
  }
  return { svg: s, height: y - y0 + 10 };
}

/** Score against target: > 1 means met (higher-better: value/target, lower-better: target/value). */
function score(f: Figure, v: number): number {
  if (!f.target) return Number.NaN;
  return f.target.op === '>=' ? v / f.target.value : f.target.value / Math.max(v, 1e-9);
}

export function renderChart(results: ScenarioResult[], title: string): string {
  const figs = results.flatMap((r) => r.figures);
  const byId = new Map(figs.map((f) => [f.id, f]));
  const panels: Panel[] = [];

  const targeted = figs.filter((f) => f.headline && f.target && Number.isFinite(f.median));
  if (targeted.length) {
    const CAP = 4;
    panels.push({
      title: 'Headline figures against their targets (bar = how many times the target; ≥ 1 is met; capped at 4)',
      scaleMax: CAP,
      refLine: { at: 1, label: 'target' },
      bars: targeted.map((f) => {
        const a = score(f, f.min);
        const b = score(f, f.max);
        return {
          label: f.label,
          value: Math.min(CAP, score(f, f.median)),
          min: Math.min(CAP, Math.min(a, b)),
          max: Math.min(CAP, Math.max(a, b)),
          text: `${fmtValue(f)} (target ${fmtTarget(f)})`,
          color: f.pass ? GREEN : RED,
        };
      }),
    });
  }

  const group = (title: string, ids: string[], colorOf: (id: string) => string) => {
    const bars = ids
      .map((id) => byId.get(id))
      .filter((f): f is Figure => !!f && Number.isFinite(f.median))
      .map((f) => ({ label: f.label, value: f.median, min: f.min, max: f.max, text: fmtValue(f), color: colorOf(f.id) }));
    if (bars.length) panels.push({ title, bars });
  };
  // msgx's own bars in blue; the baselines (pgbench, peers, the plain producer) in grey.
  const msgx = (id: string) =>
    !id.endsWith('.pgbench') &&
    (id.startsWith('e2e.') || id.startsWith('pump.') || id.startsWith('relay.msgx') || id.startsWith('peers.msgx'))
      ? BLUE
      : GREY;
  group(
    'End to end through the twin: mailbox → terminal → on Kafka, same run (msg/s; pgbench in tx/s)',
    ['e2e.pgbench', 'e2e.mysql', 'e2e.pg', 'e2e.mysql.terminal'],
    msgx,
  );
  group(
    'Serial FIFO throughput, same run (msg/s; pgbench in tx/s)',
    ['pump.pgbench', 'pump.mysql', 'pump.pg', 'peers.graphile', 'peers.pgboss'],
    msgx,
  );
  group('Relay to Kafka, same run (events/s)', ['relay.msgx', 'relay.plain'], msgx);
  group('Latency (ms)', ['wakeup.p50', 'wakeup.p99', 'relay.ack.p50', 'relay.ack.p99', 'http.send.p99', 'http.tx.p99'], () => BLUE);

  let body = '';
  let y = 40;
  for (const p of panels) {
    const r = renderPanel(p, y);
    body += r.svg;
    y += r.height + 12;
  }
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${y}" viewBox="0 0 ${W} ${y}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="24" font-size="16" font-weight="bold">${esc(title)}</text>`,
    body,
    `<text x="10" y="${y - 6}" font-size="10" fill="${GREY}">bars: median of runs; whiskers: min–max</text>`,
    `</svg>`,
    '',
  ].join('\n');
}
