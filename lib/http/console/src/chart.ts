/** The overview's chart, drawn as SVG: no chart library. */
import { s } from './dom.ts';
import { fmtCount, fmtDuration, fmtTime, niceMax } from './format.ts';
import type { ThroughputJson } from './model.ts';

/** Bars: messages finished per minute (dead ones stacked in red); line: p95 latency (right axis). */
export function throughputChart(tp: ThroughputJson): SVGSVGElement {
  const W = 760,
    H = 220,
    L = 40,
    R = 52,
    T = 12,
    B = 26;
  const bs = tp.buckets;
  const maxCount = Math.max(1, ...bs.map((b) => b.processed));
  const lats = bs.map((b) => b.latencyP95Ms).filter((v): v is number => v !== null);
  const maxLat = Math.max(1, ...lats);
  const cw = (W - L - R) / bs.length;
  const y = (v: number) => T + (H - T - B) * (1 - v / niceMax(maxCount));
  const yl = (v: number) => T + (H - T - B) * (1 - v / niceMax(maxLat));
  const svg = s('svg', {
    class: 'chart',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': 'messages per minute and p95 latency, last hour',
    'data-test': 'throughput-chart',
  });
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const cv = niceMax(maxCount) * f;
    const yy = y(cv);
    svg.append(s('line', { class: 'grid-line', x1: L, x2: W - R, y1: yy, y2: yy }));
    svg.append(s('text', { class: 'axis', x: L - 6, y: yy + 3, 'text-anchor': 'end' }, fmtCount(cv)));
    svg.append(s('text', { class: 'axis', x: W - R + 6, y: yy + 3 }, fmtDuration(niceMax(maxLat) * f)));
  }
  bs.forEach((b, i) => {
    const x = L + i * cw + cw * 0.12;
    const w = Math.max(1, cw * 0.76);
    const tip = `${fmtTime(b.minute)}  ${b.processed} finished (${b.succeeded} ok, ${b.skipped} skipped, ${b.dead} dead)${b.latencyP95Ms !== null ? `, p95 ${fmtDuration(b.latencyP95Ms)}, avg ${fmtDuration(b.latencyAvgMs)}` : ''}`;
    if (b.processed > 0) {
      const ok = b.processed - b.dead;
      if (ok > 0) svg.append(s('rect', { class: 'bar', x, y: y(ok), width: w, height: y(0) - y(ok) }, s('title', null, tip)));
      if (b.dead > 0)
        svg.append(s('rect', { class: 'bar dead', x, y: y(b.processed), width: w, height: y(ok) - y(b.processed) }, s('title', null, tip)));
    } else {
      svg.append(s('rect', { x: L + i * cw, y: T, width: cw, height: H - T - B, fill: 'transparent' }, s('title', null, tip)));
    }
    if (i % 10 === 0 || i === bs.length - 1)
      svg.append(s('text', { class: 'axis', x: L + i * cw + cw / 2, y: H - 8, 'text-anchor': 'middle' }, fmtTime(b.minute).slice(0, 5)));
  });
  const pts = bs.map((b, i): readonly [number, number] | null =>
    b.latencyP95Ms === null ? null : [L + i * cw + cw / 2, yl(b.latencyP95Ms)],
  );
  let d = '';
  let pen = false;
  for (const p of pts) {
    if (!p) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${p[0].toFixed(1)},${p[1].toFixed(1)}`;
    pen = true;
  }
  if (d) svg.append(s('path', { class: 'lat', d }));
  for (const p of pts) if (p) svg.append(s('circle', { class: 'lat-dot', cx: p[0], cy: p[1], r: 3.5 }));
  return svg;
}
