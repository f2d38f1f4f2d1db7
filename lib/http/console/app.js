// msgx console: plain browser JavaScript, no build step, no framework. Reads the admin API of
// the same origin; every write carries `x-msgx-actor: console` so audit_log names the console.

const BASE = location.pathname.replace(/\/console(\/.*)?$/, '');
const REPLAYABLE = ['CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED'];
const CLASSES = ['MALFORMED', 'PROTOCOL', 'CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED'];
const REFRESH_MS = 5000;

// ---------------------------------------------------------------- helpers

/** Builds an element; children may be strings (always text, never HTML), nodes, arrays or null. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const SVG = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs ?? {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function token() {
  const m = document.cookie.match(/(?:^|;\s*)msgx_admin_token=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : null;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body?.detail ?? body?.error ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body) {
  const headers = { accept: 'application/json', 'x-msgx-actor': 'console' };
  const t = token();
  if (t) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { error: 'bad_response', detail: text.slice(0, 200) };
  }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

function fmtTime(iso, withDate) {
  if (!iso) return '—';
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  return today && !withDate ? time : `${d.toLocaleDateString([], { year: 'numeric', month: '2-digit', day: '2-digit' })} ${time}`;
}
function timeEl(iso, withDate) {
  return iso ? h('span', { class: 'nowrap', title: iso }, fmtTime(iso, withDate)) : h('span', { class: 'muted' }, '—');
}
function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec < 10 ? sec.toFixed(1) : Math.round(sec)} s`;
  const min = sec / 60;
  if (min < 60) return `${Math.floor(min)} m ${Math.round(sec % 60)} s`;
  const hr = min / 60;
  if (hr < 48) return `${Math.floor(hr)} h ${Math.round(min % 60)} m`;
  return `${Math.round(hr / 24)} d`;
}
function ago(iso) {
  return iso ? `${fmtDuration(Date.now() - Date.parse(iso))} ago` : '';
}
const n = (v) => (v ?? 0).toLocaleString();
const plural = (count, word) => `${n(count)} ${word}${count === 1 ? '' : 's'}`;

const STATUS_TONE = {
  SUCCEEDED: 'ok', SENT: 'ok', CONSUMED: 'ok', DELIVERED: 'ok', ok: 'ok', done: 'ok',
  DEAD: 'bad', failed: 'bad', ROLLED_BACK: 'warn',
  FAILED: 'warn', DELIVERING: 'info', PENDING: 'info', PREPARED: 'info', COMMITTED: 'info', pending: 'warn', open: 'info',
  SKIPPED: '',
};
function badge(status, extra) {
  if (status === null || status === undefined) return null;
  return h('span', { class: `badge ${STATUS_TONE[status] ?? ''}`, 'data-status': status }, extra ? `${status} ${extra}` : status);
}

function toast(message, tone = '') {
  const el = h('div', { class: `toast ${tone}` }, message);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), 6000);
}

function table(columns, rows, opts = {}) {
  const head = h('tr', null, columns.map((c) => h('th', { class: c.num ? 'num' : null }, c.label)));
  const body = rows.length
    ? rows.map((r) => h('tr', opts.rowAttrs ? opts.rowAttrs(r) : null, columns.map((c) => h('td', { class: [c.num ? 'num' : '', c.wrap ? 'wrap' : ''].join(' ').trim() || null }, c.render(r)))))
    : [h('tr', null, h('td', { class: 'empty', colspan: columns.length }, opts.empty ?? 'Nothing here.'))];
  return h('div', { class: 'table-wrap' }, h('table', opts.attrs ?? null, h('thead', null, head), h('tbody', null, body)));
}

/** Delivery that is not moving, above everything else: stale targets and topics the cluster lacks. */
function deliveryProblemsCallout(stats) {
  const stale = stats.staleTargets ?? [];
  const missing = stats.missingTopics ?? [];
  if (!stale.length && !missing.length) return null;
  return h(
    'div',
    { class: 'callout bad section-gap', 'data-test': 'delivery-problems' },
    h('strong', null, 'Delivery is not moving'),
    stale.length
      ? h('ul', null, stale.map((t) => h('li', { 'data-test': 'stale-target' },
          h('code', null, t.target), ` head #${t.headEventId} waiting ${fmtDuration(t.ageSeconds * 1000)}`,
          t.stalledSeconds != null ? ` · stalled ${fmtDuration(t.stalledSeconds * 1000)} (destination unreachable)` : ` · ${t.headAttempts} attempts`,
          t.reason ? [' · ', h('span', { class: 'err' }, t.reason)] : null)))
      : null,
    missing.length
      ? h('ul', null, missing.map((m) => h('li', { 'data-test': 'missing-topic' }, 'Kafka topic ', h('code', null, m.topic), ` does not exist (target ${m.target}${m.open ? `, ${m.open} events waiting` : ''})`)))
      : null,
  );
}

function card(title, body, opts = {}) {
  return h('section', { class: 'card', ...(opts.attrs ?? {}) }, title ? h('div', { class: 'card-head' }, h('h2', null, title), opts.right ?? null) : null, body);
}
function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', null, k), h('dd', null, v ?? h('span', { class: 'muted' }, '—'))]));
}
function errorBox(err) {
  if (err instanceof ApiError && (err.status === 401 || err.status === 403))
    return h('div', { class: 'callout bad' }, h('strong', null, 'Not authorised'), 'The admin API refused this console. ', token() ? 'The admin token may be wrong. ' : '', h('a', { href: '#', onclick: signOut }, 'Sign in again'));
  return h('div', { class: 'callout bad' }, h('strong', null, 'Request failed'), err.message ?? String(err));
}
function signOut(e) {
  e?.preventDefault();
  document.cookie = 'msgx_admin_token=; path=/; max-age=0; SameSite=Strict';
  location.reload();
}

// ---------------------------------------------------------------- dialog

const dialog = document.getElementById('dialog');
/** Opens the modal; `actions` are [{label, tone, onClick}] and onClick may return a promise. */
function openDialog(title, body, actions) {
  dialog.replaceChildren(
    h('div', { class: 'd-head' }, h('h2', null, title)),
    h('div', { class: 'd-body' }, body),
    h(
      'div',
      { class: 'd-foot' },
      h('button', { type: 'button', onclick: () => dialog.close(), 'data-test': 'dialog-cancel' }, 'Cancel'),
      actions.map((a) =>
        h(
          'button',
          {
            type: 'button',
            class: a.tone ?? 'primary',
            disabled: a.disabled,
            'data-test': a.test,
            onclick: async (e) => {
              e.currentTarget.disabled = true;
              try {
                await a.onClick();
                dialog.close();
              } catch (err) {
                e.currentTarget.disabled = false;
                dialog.querySelector('.d-body').prepend(errorBox(err));
              }
            },
          },
          a.label,
        ),
      ),
    ),
  );
  if (!dialog.open) dialog.showModal();
}

/**
 * Replay with a preview: a dry run first (what would move, what is refused and why, the order
 * warning of seed 000 §6.1), then the real replay only on confirmation. Both are audited.
 */
async function replayFlow(kind, selector, label, after) {
  let preview;
  try {
    preview = await api('POST', '/admin/replay', { kind, ...selector, dryRun: true });
  } catch (err) {
    toast(`Dry run failed: ${err.message}`, 'bad');
    return;
  }
  const moved = preview.moved ?? [];
  const refused = preview.refused ?? [];
  const warnings = preview.warnings ?? [];
  const idOf = (m) => (kind === 'proc' ? `#${m.msgId}` : `event ${m.eventId}`);
  const body = h(
    'div',
    { 'data-test': 'replay-preview' },
    h('p', null, 'Dry run of ', h('strong', null, label), ': nothing has changed yet.'),
    moved.length
      ? h('div', { class: 'callout info' }, h('strong', null, `${moved.length} ${kind === 'proc' ? 'message' : 'event'}${moved.length === 1 ? '' : 's'} would go back to PENDING`), moved.slice(0, 30).map(idOf).join(', '), moved.length > 30 ? ` and ${moved.length - 30} more` : '')
      : h('div', { class: 'callout bad' }, h('strong', null, 'Nothing to replay'), 'No dead or failed item matches.'),
    warnings.map((w) => h('div', { class: 'callout warn', 'data-test': 'replay-warning' }, h('strong', null, 'Order warning'), w)),
    kind === 'proc' && moved.length
      ? h('p', { class: 'muted small' }, 'A replayed message is processed again after the messages that arrived since; it does not go back to its place in the original order.')
      : null,
    refused.length
      ? h('div', { class: 'callout bad' }, h('strong', null, `${refused.length} refused`), h('ul', null, refused.slice(0, 20).map((r) => h('li', null, `${r.msgId ? `#${r.msgId}` : `event ${r.eventId ?? r.id ?? ''}`}: ${r.reason}`))))
      : null,
  );
  openDialog(`Replay ${label}`, body, [
    {
      label: moved.length ? `Replay ${moved.length}` : 'Replay',
      disabled: moved.length === 0,
      test: 'replay-confirm',
      onClick: async () => {
        const r = await api('POST', '/admin/replay', { kind, ...selector, dryRun: false });
        toast(`Replayed ${r.moved.length} ${kind === 'proc' ? 'message' : 'event'}${r.moved.length === 1 ? '' : 's'}${r.refused?.length ? `, ${r.refused.length} refused` : ''}`, 'ok');
        after?.(r);
      },
    },
  ]);
}

function resendFlow(msg, after) {
  const back = msg.deadPhase === 'check' ? 'PREPARED and is checked back with its producer again' : 'COMMITTED and is delivered again on a fresh redelivery schedule';
  openDialog(
    `Resend ${msg.id}`,
    h(
      'div',
      null,
      h('p', null, 'The message goes back to ', h('strong', null, back), '.'),
      msg.deadReason ? h('div', { class: 'callout bad' }, h('strong', null, 'Why it died'), msg.deadReason) : null,
      h('div', { class: 'callout warn' }, h('strong', null, 'Order'), 'Consumers receive it after messages sent while it was dead; they dedupe by msgx-txmsg-id.'),
    ),
    [
      {
        label: 'Resend',
        test: 'resend-confirm',
        onClick: async () => {
          const r = await api('POST', `/admin/tx-messages/${encodeURIComponent(msg.id)}/resend`);
          toast(`Resent ${r.id}: now ${r.status}`, 'ok');
          after?.(r);
        },
      },
    ],
  );
}

function pauseFlow(paused, after) {
  openDialog(
    paused ? 'Resume the pipeline' : 'Pause the pipeline',
    h('p', null, paused ? 'Head processing starts again at once.' : 'Head processing stops. The ingress keeps accepting and the poller keeps enqueueing; nothing is lost.'),
    [
      {
        label: paused ? 'Resume' : 'Pause',
        tone: paused ? 'primary' : 'danger',
        test: 'pause-confirm',
        onClick: async () => {
          await api('POST', paused ? '/admin/resume' : '/admin/pause');
          toast(paused ? 'Pipeline resumed' : 'Pipeline paused', 'ok');
          after?.();
        },
      },
    ],
  );
}

// ---------------------------------------------------------------- chart

/** Bars: messages finished per minute (dead ones stacked in red); line: p95 latency (right axis). */
function throughputChart(tp) {
  const W = 760, H = 220, L = 40, R = 52, T = 12, B = 26;
  const bs = tp.buckets;
  const maxCount = Math.max(1, ...bs.map((b) => b.processed));
  const lats = bs.map((b) => b.latencyP95Ms).filter((v) => v !== null);
  const maxLat = Math.max(1, ...lats);
  const cw = (W - L - R) / bs.length;
  const y = (v) => T + (H - T - B) * (1 - v / niceMax(maxCount));
  const yl = (v) => T + (H - T - B) * (1 - v / niceMax(maxLat));
  const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'messages per minute and p95 latency, last hour', 'data-test': 'throughput-chart' });
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
      if (b.dead > 0) svg.append(s('rect', { class: 'bar dead', x, y: y(b.processed), width: w, height: y(ok) - y(b.processed) }, s('title', null, tip)));
    } else {
      svg.append(s('rect', { x: L + i * cw, y: T, width: cw, height: H - T - B, fill: 'transparent' }, s('title', null, tip)));
    }
    if (i % 10 === 0 || i === bs.length - 1) svg.append(s('text', { class: 'axis', x: L + i * cw + cw / 2, y: H - 8, 'text-anchor': 'middle' }, fmtTime(b.minute).slice(0, 5)));
  });
  const pts = bs.map((b, i) => (b.latencyP95Ms === null ? null : [L + i * cw + cw / 2, yl(b.latencyP95Ms)]));
  let d = '';
  let pen = false;
  for (const p of pts) {
    if (!p) { pen = false; continue; }
    d += `${pen ? 'L' : 'M'}${p[0].toFixed(1)},${p[1].toFixed(1)}`;
    pen = true;
  }
  if (d) svg.append(s('path', { class: 'lat', d }));
  pts.forEach((p) => p && svg.append(s('circle', { class: 'lat-dot', cx: p[0], cy: p[1], r: 3.5 })));
  return svg;
}
/** A round axis maximum that splits into four round steps (counts stay whole numbers). */
function niceMax(v) {
  if (v <= 4) return 4;
  const step = v / 4;
  const p = 10 ** Math.floor(Math.log10(step));
  for (const m of [1, 2, 5, 10]) if (m * p >= step) return 4 * m * p;
  return 40 * p;
}
const fmtCount = (v) => (v >= 1000 ? `${(v / 1000).toFixed(v % 1000 ? 1 : 0)}k` : String(Math.round(v * 10) / 10));

// ---------------------------------------------------------------- pages

let refreshTimer = null;
const view = document.getElementById('view');

function setNav(name) {
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === name);
}

async function updatePill(paused) {
  const pill = document.getElementById('pipeline-pill');
  pill.className = `pill ${paused ? 'paused' : 'running'}`;
  pill.textContent = paused ? 'Pipeline paused' : 'Pipeline running';
  document.getElementById('updated').textContent = `updated ${fmtTime(new Date().toISOString())}`;
}

async function overviewPage() {
  setNav('overview');
  const [stats, tp] = await Promise.all([api('GET', '/admin/stats'), api('GET', '/admin/throughput?minutes=60')]);
  updatePill(stats.paused);
  const p = stats.pipeline;
  const deadProc = Object.values(p.deadByClass ?? {}).reduce((a, b) => a + b, 0);
  const deadEvents = (stats.events ?? []).reduce((a, t) => a + (t.dead ?? 0), 0);
  const txDead = stats.txmsg?.DEAD ?? 0;
  const head = p.head;

  const kpis = h(
    'div',
    { class: 'grid kpis' },
    card(null, [
      h('div', { class: 'label' }, 'Pipeline'),
      h('div', { class: 'value', 'data-test': 'pipeline-state' }, stats.paused ? 'Paused' : 'Running'),
      h('div', { class: 'sub' }, stats.paused ? 'no head processing; ingress still accepts' : 'processing the FIFO head'),
      h('div', { class: 'actions' }, h('button', { class: stats.paused ? 'primary' : '', 'data-test': 'pause-toggle', onclick: () => pauseFlow(stats.paused, rerender) }, stats.paused ? 'Resume' : 'Pause')),
    ], { attrs: { class: 'card kpi' } }),
    card(null, [
      h('div', { class: 'label' }, 'Backlog'),
      h('div', { class: 'value', 'data-test': 'backlog' }, n(p.backlog)),
      h('div', { class: 'sub' }, `${n(p.byStatus?.PENDING)} pending · ${n(p.byStatus?.FAILED)} failed (retrying)`),
    ], { attrs: { class: 'card kpi' } }),
    card(null, [
      h('div', { class: 'label' }, 'Head message'),
      head
        ? [
            h('div', { class: 'value' }, h('a', { href: `#/trace/proc/${head.msgId}` }, `#${head.msgId}`), ' ', badge(head.status)),
            h('div', { class: 'sub', 'data-test': 'head-age' }, `age ${fmtDuration(head.ageSeconds * 1000)} · attempts ${head.attempts}${head.errorClass ? ` · ${head.errorClass}` : ''}`),
          ]
        : [h('div', { class: 'value muted' }, 'empty'), h('div', { class: 'sub' }, 'nothing waiting')],
    ], { attrs: { class: 'card kpi' } }),
    card(null, [
      h('div', { class: 'label' }, 'Mailbox order'),
      h('div', { class: 'value', 'data-test': 'mailbox-holes' }, n(stats.ordering?.holesDeclared)),
      h('div', { class: 'sub' }, `IDs given up as holes · ${n(stats.ordering?.lateRows)} late · ${n(stats.ordering?.gapsWaiting)} gap(s) waited for · frontier #${stats.ordering?.accounted ?? 0}`),
    ], { attrs: { class: 'card kpi' } }),
    card(null, [
      h('div', { class: 'label' }, 'Dead letters'),
      h('div', { class: 'value', 'data-test': 'dead-total' }, n(deadProc + deadEvents + txDead)),
      h('div', { class: 'sub' }, h('a', { href: '#/dead/proc' }, plural(deadProc, 'message')), ' · ', h('a', { href: '#/dead/event' }, plural(deadEvents, 'event')), ' · ', h('a', { href: '#/dead/txmsg' }, `${n(txDead)} tx`)),
    ], { attrs: { class: 'card kpi' } }),
  );

  const t = tp.totals;
  const chartCard = card('Throughput and latency, last hour', [
    throughputChart(tp),
    h('div', { class: 'legend' }, h('span', null, h('i', { class: 'lg-bar' }), 'finished / min'), h('span', null, h('i', { class: 'lg-dead' }), 'dead / min'), h('span', null, h('i', { class: 'lg-lat' }), 'p95 latency (enqueued → finished)')),
  ], { right: h('span', { class: 'muted small', 'data-test': 'throughput-totals' }, `${n(t.processed)} finished · avg ${fmtDuration(t.latencyAvgMs)} · p95 ${fmtDuration(t.latencyP95Ms)}`) });

  const events = card('Events pending per target', table(
    [
      { label: 'target', render: (r) => h('code', null, r.target) },
      { label: 'pending', num: true, render: (r) => n(r.pending) },
      { label: 'delivering', num: true, render: (r) => n(r.delivering) },
      // Stalled = held by an outage of its destination (no attempt spent); the reason is the badge's
      // tooltip, and in full in the "Delivery is not moving" callout above.
      {
        label: 'head',
        num: true,
        render: (r) =>
          r.stalledSeconds != null
            ? [String(r.headEventId), ' ', h('span', { class: 'badge bad', 'data-test': 'target-stalled', title: r.headLastError ?? '' }, `STALLED ${fmtDuration(r.stalledSeconds * 1000)}`)]
            : r.headAttempts
              ? [String(r.headEventId), ' ', h('span', { class: 'badge warn', 'data-status': 'FAILED', title: r.headLastError ?? '' }, `FAILED ×${r.headAttempts}`)]
              : String(r.headEventId),
      },
      { label: 'oldest', num: true, render: (r) => fmtDuration((r.oldestAgeSeconds ?? 0) * 1000) },
      { label: 'dead', num: true, render: (r) => (r.dead ? h('a', { href: `#/dead/event?target=${encodeURIComponent(r.target)}` }, n(r.dead)) : '0') },
    ],
    stats.events ?? [],
    { empty: 'Every event is delivered.', attrs: { 'data-test': 'events-table' } },
  ));
  const problems = deliveryProblemsCallout(stats);

  const deadClasses = card('Dead messages per class', table(
    [
      { label: 'class', render: (r) => h('a', { href: `#/dead/proc?errorClass=${r[0]}` }, r[0]) },
      { label: 'replay', render: (r) => (REPLAYABLE.includes(r[0]) ? h('span', { class: 'badge ok' }, 'replayable') : h('span', { class: 'badge' }, 'needs a fixed message')) },
      { label: 'count', num: true, render: (r) => n(r[1]) },
    ],
    Object.entries(p.deadByClass ?? {}),
    { empty: 'No dead messages.', attrs: { 'data-test': 'dead-classes' } },
  ));

  const byStatus = card('Messages per state', table(
    [{ label: 'state', render: (r) => badge(r[0]) }, { label: 'count', num: true, render: (r) => n(r[1]) }],
    ['PENDING', 'FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD'].filter((k) => p.byStatus?.[k] !== undefined).map((k) => [k, p.byStatus[k]]),
    { empty: 'No messages yet.' },
  ));
  const tx = card('Transactional messages per state', table(
    [
      { label: 'state', render: (r) => (r[0] === 'DEAD' ? h('a', { href: '#/dead/txmsg' }, badge(r[0])) : badge(r[0])) },
      { label: 'count', num: true, render: (r) => n(r[1]) },
    ],
    Object.entries(stats.txmsg ?? {}),
    { empty: 'No transactional messages.', attrs: { 'data-test': 'tx-states' } },
  ));

  view.replaceChildren(
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'Overview'), h('p', null, `As of ${fmtTime(stats.at, true)} · refreshes every ${REFRESH_MS / 1000} s`))),
    kpis,
    problems,
    h('div', { class: 'grid two section-gap' }, chartCard, events),
    h('div', { class: 'grid three section-gap' }, deadClasses, byStatus, tx),
  );
  refreshTimer = setTimeout(rerender, REFRESH_MS);
}

function deadTabs(active, counts) {
  const tab = (k, label) => h('a', { href: `#/dead/${k}`, class: k === active ? 'active' : null, 'data-test': `tab-${k}` }, label, counts?.[k] !== undefined ? h('span', { class: 'badge count' }, n(counts[k])) : null);
  return h('div', { class: 'tabs' }, tab('proc', 'Processing'), tab('event', 'Events'), tab('txmsg', 'Transactional'));
}

async function deadPage(kind, query) {
  setNav('dead');
  const params = new URLSearchParams({ kind, limit: '500' });
  if (kind === 'proc' && query.get('errorClass')) params.set('errorClass', query.get('errorClass'));
  if (kind === 'event' && query.get('target')) params.set('target', query.get('target'));
  const [list, stats] = await Promise.all([api('GET', `/admin/dead?${params}`), api('GET', '/admin/stats')]);
  updatePill(stats.paused);
  const counts = {
    proc: Object.values(stats.pipeline.deadByClass ?? {}).reduce((a, b) => a + b, 0),
    event: (stats.events ?? []).reduce((a, t) => a + (t.dead ?? 0), 0),
    txmsg: stats.txmsg?.DEAD ?? 0,
  };
  const items = list.items ?? [];
  const selected = new Set();
  const search = h('input', { type: 'search', placeholder: 'filter rows…', 'data-test': 'dead-search', value: query.get('q') ?? '' });
  const tableHost = h('div');
  const bulk = h('button', { class: 'primary', disabled: true, 'data-test': 'bulk-action' }, kind === 'txmsg' ? 'Resend selected' : 'Replay selected');

  const reload = () => rerender();
  const idOf = (r) => (kind === 'proc' ? r.msg_id : kind === 'event' ? r.eventId : r.id);
  const check = (r) =>
    h('input', {
      type: 'checkbox',
      'aria-label': `select ${idOf(r)}`,
      disabled: kind === 'proc' && !REPLAYABLE.includes(r.error_class),
      onchange: (e) => {
        e.target.checked ? selected.add(idOf(r)) : selected.delete(idOf(r));
        bulk.disabled = selected.size === 0;
        bulk.textContent = `${kind === 'txmsg' ? 'Resend' : 'Replay'} selected${selected.size ? ` (${selected.size})` : ''}`;
      },
    });

  const columns = {
    proc: [
      { label: '', render: check },
      { label: 'message', render: (r) => h('a', { href: `#/trace/proc/${r.msg_id}`, 'data-test': 'trace-link' }, `#${r.msg_id}`) },
      { label: 'type', render: (r) => (r.msg_type ? `${r.msg_type}${r.msg_subtype ? `/${r.msg_subtype}` : ''}` : h('span', { class: 'muted' }, '—')) },
      { label: 'state', render: (r) => badge(r.status) },
      { label: 'class', render: (r) => h('code', null, r.error_class ?? '') },
      { label: 'reason', wrap: true, render: (r) => h('span', { class: 'err' }, r.error_detail ?? '') },
      { label: 'attempts', num: true, render: (r) => String(r.attempts) },
      { label: 'finished', render: (r) => timeEl(r.finished_at ?? r.updated_at) },
      {
        label: '',
        render: (r) =>
          REPLAYABLE.includes(r.error_class)
            ? h('button', { class: 'small', 'data-test': 'replay-one', onclick: () => replayFlow('proc', { ids: [r.msg_id] }, `message #${r.msg_id}`, reload) }, 'Replay…')
            : h('span', { class: 'muted small', title: 'MALFORMED and PROTOCOL need a corrected message from upstream' }, 'fix upstream'),
      },
    ],
    event: [
      { label: '', render: check },
      { label: 'event', render: (r) => String(r.eventId) },
      { label: 'target', render: (r) => h('code', null, r.target) },
      { label: 'type', render: (r) => r.type },
      { label: 'key', render: (r) => r.key ?? '—' },
      { label: 'version', num: true, render: (r) => (r.stateVersion ?? '—') },
      { label: 'source', render: (r) => sourceLink(r.sourceKind, r.sourceId) },
      { label: 'last error', wrap: true, render: (r) => h('span', { class: 'err' }, r.lastError ?? '') },
      { label: 'attempts', num: true, render: (r) => String(r.attempts) },
      { label: 'dead at', render: (r) => timeEl(r.deadAt) },
      { label: '', render: (r) => h('button', { class: 'small', 'data-test': 'replay-one', onclick: () => replayFlow('event', { ids: [r.eventId] }, `event ${r.eventId}`, reload) }, 'Replay…') },
    ],
    txmsg: [
      { label: '', render: check },
      { label: 'message', render: (r) => h('a', { href: `#/trace/tx/${encodeURIComponent(r.id)}`, 'data-test': 'trace-link' }, h('code', null, r.id)) },
      { label: 'topic', render: (r) => h('code', null, r.topic) },
      { label: 'business', render: (r) => r.bizName ?? '—' },
      { label: 'key', render: (r) => r.key ?? '—' },
      { label: 'created by', render: (r) => r.createdBy ?? '—' },
      { label: 'resent by', render: (r) => r.resentBy ?? '—' },
      { label: 'died in', render: (r) => badge(r.deadPhase ?? 'delivery') },
      { label: 'reason', wrap: true, render: (r) => h('span', { class: 'err' }, r.deadReason ?? r.lastError ?? '') },
      { label: 'checks', num: true, render: (r) => String(r.checks) },
      { label: 'deliveries', num: true, render: (r) => String(r.attempts) },
      { label: 'updated', render: (r) => timeEl(r.updatedAt) },
      { label: '', render: (r) => h('button', { class: 'small', 'data-test': 'resend-one', onclick: () => resendFlow(r, reload) }, 'Resend…') },
    ],
  }[kind];

  const draw = () => {
    const q = search.value.trim().toLowerCase();
    const rows = q ? items.filter((r) => JSON.stringify(r).toLowerCase().includes(q)) : items;
    tableHost.replaceChildren(table(columns, rows, { empty: q ? 'No row matches the filter.' : 'No dead letters here.', attrs: { 'data-test': 'dead-table' }, rowAttrs: (r) => ({ 'data-id': idOf(r) }) }));
  };
  search.addEventListener('input', draw);
  draw();

  bulk.addEventListener('click', async () => {
    const ids = [...selected];
    if (kind === 'txmsg') {
      // One resend per message: each is its own audited transition.
      let ok = 0;
      for (const id of ids) {
        try {
          await api('POST', `/admin/tx-messages/${encodeURIComponent(id)}/resend`);
          ok++;
        } catch (err) {
          toast(`${id}: ${err.message}`, 'bad');
        }
      }
      toast(`Resent ${ok} of ${ids.length}`, ok ? 'ok' : 'bad');
      reload();
    } else replayFlow(kind, { ids }, `${ids.length} selected ${kind === 'proc' ? 'message' : 'event'}${ids.length === 1 ? '' : 's'}`, reload);
  });

  const filters = [];
  if (kind === 'proc') {
    const sel = h('select', { 'data-test': 'class-filter', onchange: (e) => go(`#/dead/proc${e.target.value ? `?errorClass=${e.target.value}` : ''}`) }, h('option', { value: '' }, 'every class'), CLASSES.map((c) => h('option', { value: c, selected: query.get('errorClass') === c }, c)));
    filters.push(h('label', { class: 'inline' }, 'class', sel));
    const cls = query.get('errorClass');
    if (cls && REPLAYABLE.includes(cls))
      filters.push(h('button', { 'data-test': 'replay-class', onclick: () => replayFlow('proc', { errorClass: cls }, `every ${cls} message`, reload) }, `Replay all ${cls}…`));
  }
  if (kind === 'event') {
    const targets = [...new Set(['msg', 'schd', ...(stats.events ?? []).map((t) => t.target), ...items.map((i) => i.target)])];
    const sel = h('select', { 'data-test': 'target-filter', onchange: (e) => go(`#/dead/event${e.target.value ? `?target=${encodeURIComponent(e.target.value)}` : ''}`) }, h('option', { value: '' }, 'every target'), targets.map((t) => h('option', { value: t, selected: query.get('target') === t }, t)));
    filters.push(h('label', { class: 'inline' }, 'target', sel));
    const tgt = query.get('target');
    if (tgt) filters.push(h('button', { onclick: () => replayFlow('event', { target: tgt }, `every dead event of ${tgt}`, reload) }, `Replay all of ${tgt}…`));
  }

  const help = {
    proc: 'Messages that processing gave up on. CODEC_ERROR, UNSUPPORTED, INFRA and EXHAUSTED can be replayed once the cause is fixed; MALFORMED and PROTOCOL need a corrected message from upstream.',
    event: 'Events the relay gave up on after its retries. A replayed event keeps its event ID, so consumers can dedupe it.',
    txmsg: 'Transactional messages that died unconfirmed (check-back) or undelivered. Resend puts them back to PREPARED or COMMITTED.',
  }[kind];

  view.replaceChildren(
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'Dead letters'), h('p', null, help))),
    deadTabs(kind, counts),
    card(null, [h('div', { class: 'toolbar' }, filters, search, h('span', { class: 'spacer' }), h('span', { class: 'muted small' }, `${items.length} shown`), bulk), tableHost]),
  );
}

function sourceLink(kind, id) {
  if (!id) return h('span', { class: 'muted' }, kind ?? '—');
  if (kind === 'proc') return h('a', { href: `#/trace/proc/${id}` }, `message #${id}`);
  if (kind === 'txmsg') return h('a', { href: `#/trace/tx/${encodeURIComponent(id)}` }, `tx ${id}`);
  return h('span', { class: 'muted' }, `${kind}:${id}`);
}

// ---------------------------------------------------------------- trace

const KIND_TONE = {
  attempt: null, 'flight-change': 'info', published: 'ok', sent: 'ok', ack: 'ok', commit: 'ok', backfill: 'ok', consumed: 'ok',
  'publish-failed': 'bad', 'event-dead': 'bad', dead: 'bad', 'delivery-failed': 'bad', 'backfill-pending': 'warn', replay: 'warn', resend: 'warn', rollback: 'warn',
  check: 'info', enqueue: 'info', enqueued: 'info', received: 'info', prepare: 'info', event: 'info', snapshot: 'info', redeliver: 'warn',
};

/** One timeline renderer for both traces: entries are {seq, at, kind, status, detail}. */
function timeline(entries) {
  if (!entries.length) return h('p', { class: 'muted' }, 'Nothing recorded yet.');
  return h(
    'ol',
    { class: 'timeline', 'data-test': 'timeline' },
    entries.map((e) => {
      const tone = e.kind === 'attempt' ? STATUS_TONE[e.status] ?? '' : KIND_TONE[e.kind] ?? '';
      const detail = Object.entries(e.detail ?? {}).filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0));
      return h(
        'li',
        { class: tone, 'data-kind': e.kind },
        h('span', { class: 'dot' }),
        h('div', { class: 'tl-head' }, h('span', { class: 'tl-time', title: e.at }, fmtTime(e.at)), h('span', { class: 'tl-kind' }, e.kind), e.status ? badge(e.status) : null),
        detail.length ? h('div', { class: 'tl-detail' }, detail.map(([k, v]) => h('span', null, h('span', { class: 'muted' }, `${k} `), Array.isArray(v) ? v.join(', ') : typeof v === 'object' ? JSON.stringify(v) : String(v)))) : null,
      );
    }),
  );
}

function eventsTable(events, empty) {
  const versioned = events.some((e) => e.stateVersion !== null);
  return table(
    [
      { label: 'event', render: (e) => String(e.eventId) },
      { label: 'target', render: (e) => h('code', null, e.target) },
      { label: 'type', render: (e) => e.type },
      { label: 'key', render: (e) => e.key ?? '—' },
      versioned ? { label: 'version', num: true, render: (e) => e.stateVersion ?? '—' } : null,
      { label: 'state', render: (e) => [badge(e.status), e.sentAs && e.sentAs !== e.eventId ? h('div', { class: 'muted small' }, `as event ${e.sentAs}`) : null] },
      {
        label: 'publishers',
        render: (e) =>
          e.deliveries.length
            ? e.deliveries.map((d) =>
                h('div', { class: 'small nowrap' }, badge(d.outcome), ' ', h('code', null, d.publisher), d.partition !== null ? ` p${d.partition}` : '', d.offset !== null ? ` @${d.offset}` : '', d.tries > 1 ? ` (${d.tries} tries)` : '', d.error ? h('div', { class: 'err small' }, d.error) : null),
              )
            : h('span', { class: 'muted small' }, e.status === 'SENT' ? 'sent with a newer version' : 'not yet'),
      },
      { label: 'attempts', num: true, render: (e) => String(e.attempts) },
      { label: 'sent', render: (e) => timeEl(e.sentAt ?? e.deadAt) },
    ].filter(Boolean),
    events,
    { empty, attrs: { 'data-test': 'events' } },
  );
}

function traceForm(kind, id) {
  const input = h('input', { type: 'text', placeholder: 'mailbox ID or tx message ID', value: id ?? '', 'data-test': 'trace-input' });
  const sel = h('select', { 'data-test': 'trace-kind' }, h('option', { value: 'proc', selected: kind !== 'tx' }, 'inbound message'), h('option', { value: 'tx', selected: kind === 'tx' }, 'transactional message'));
  return h(
    'form',
    { class: 'trace-form', onsubmit: (e) => { e.preventDefault(); if (input.value.trim()) go(`#/trace/${sel.value}/${encodeURIComponent(input.value.trim())}`); } },
    sel, input, h('button', { type: 'submit', class: 'primary' }, 'Open trace'),
  );
}

async function traceIndexPage() {
  setNav('trace');
  view.replaceChildren(
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'Trace'), h('p', null, 'The recorded path of one message: attempts, flight changes, events and their publishers, the mailbox backfill; or a transactional message from prepare to ack.'))),
    card(null, traceForm('proc')),
  );
}

async function procTracePage(id) {
  setNav('trace');
  const t = await api('GET', `/admin/trace/${encodeURIComponent(id)}`);
  const m = t.message;
  const actions = [];
  if ((m.status === 'DEAD' || m.status === 'FAILED') && REPLAYABLE.includes(m.errorClass))
    actions.push(h('button', { class: 'primary', 'data-test': 'trace-replay', onclick: () => replayFlow('proc', { ids: [m.msgId] }, `message #${m.msgId}`, rerender) }, 'Replay…'));
  actions.push(h('button', { onclick: rerender }, 'Refresh'));

  const summary = card('Message', facts([
    ['mailbox ID', h('code', null, String(t.msgId))],
    ['state', h('span', { 'data-test': 'trace-status' }, badge(m.status))],
    ['identity', m.identity ? h('code', null, m.identity) : null],
    ['type', m.type ? `${m.type}${m.subtype ? ` / ${m.subtype}` : ''}` : null],
    ['attempts', String(m.attempts)],
    m.errorClass ? ['error', h('span', null, h('code', null, m.errorClass), ' ', h('span', { class: 'err' }, m.errorDetail ?? ''))] : null,
    m.note ? ['note', m.note] : null,
    ['received', timeEl(m.receivedAt, true)],
    ['enqueued', timeEl(m.enqueuedAt, true)],
    ['finished', timeEl(m.finishedAt, true)],
    ['latency', fmtDuration(m.latencyMs)],
    m.nextAttemptAt ? ['next attempt', timeEl(m.nextAttemptAt, true)] : null,
    m.archived ? ['archived', 'yes (proc_state_hst)'] : null,
  ]));

  const b = t.backfill;
  const mb = t.mailbox;
  const mailbox = card('Mailbox and backfill', [
    facts([
      ['row', `CMINMSGS.ID ${mb.id}`],
      ['in the mailbox', mb.present === null ? (mb.error ? h('span', { class: 'err' }, mb.error) : 'not asked') : mb.present ? 'yes' : 'purged by its owner (our copy is kept)'],
      ['marked processed', mb.processed === null ? '—' : mb.processed ? 'yes' : 'no'],
      ['backfill', h('span', { 'data-test': 'backfill-state' }, badge(b.state))],
      b.procStatus ? ['PROC_STATUS', h('code', null, b.procStatus)] : null,
      b.procNote ? ['PROC_NOTE', b.procNote] : null,
      b.processedAt ? ['DATE_PROCESSED', timeEl(b.processedAt, true)] : null,
      b.state === 'pending' ? ['retries', `${b.attempts}, next ${fmtTime(b.nextAttemptAt)}`] : null,
      b.lastError ? ['last error', h('span', { class: 'err' }, b.lastError)] : null,
    ]),
    mb.rawText ? h('details', { class: 'section-gap' }, h('summary', null, `Raw text (${mb.rawText.length} characters)`), h('pre', { class: 'raw' }, mb.rawText)) : null,
  ]);

  const attempts = card('Processing attempts', table(
    [
      { label: '#', render: (a) => String(t.attempts.indexOf(a) + 1) },
      { label: 'outcome', render: (a) => badge(a.outcome) },
      { label: 'class', render: (a) => (a.errorClass ? h('code', null, a.errorClass) : '—') },
      { label: 'reason', wrap: true, render: (a) => h('span', { class: 'err' }, a.errorDetail ?? '') },
      { label: 'at', render: (a) => timeEl(a.finishedAt, true) },
    ],
    t.attempts,
    { empty: 'Not attempted yet.', attrs: { 'data-test': 'attempts' } },
  ));

  const changes = card('Flight changes', table(
    [
      { label: 'flight', render: (c) => h('code', null, c.flid) },
      { label: 'day', render: (c) => c.opdy ?? '—' },
      { label: 'change', render: (c) => badge(c.change.toUpperCase()) },
      { label: 'version', render: (c) => (c.fromVersion ? `${c.fromVersion} → ${c.toVersion}` : `new, ${c.toVersion}`) },
      { label: 'fields', wrap: true, render: (c) => (c.fields.length ? c.fields.join(', ') : '—') },
    ],
    t.flightChanges,
    { empty: m.status === 'SUCCEEDED' ? 'No flight changed (the message changed nothing).' : 'No flight changed.', attrs: { 'data-test': 'flight-changes' } },
  ));

  const snapshot = t.snapshot.length
    ? card('Snapshot package', table(
        [
          { label: 'STYP', render: (x) => x.styp },
          { label: 'day', render: (x) => x.scope ?? '—' },
          { label: 'flights', num: true, render: (x) => String(x.flights) },
          { label: 'created', num: true, render: (x) => String(x.created) },
          { label: 'updated', num: true, render: (x) => String(x.updated) },
          { label: 'unchanged', num: true, render: (x) => String(x.unchanged) },
          { label: 'stale', num: true, render: (x) => String(x.stale) },
        ],
        t.snapshot,
      ))
    : null;

  view.replaceChildren(
    h('div', { class: 'page-head' }, h('div', null, h('h1', { 'data-test': 'trace-title' }, `Message #${t.msgId} `, badge(m.status)), h('p', null, m.identity ?? 'identity not bound (never decoded)')), h('div', { class: 'toolbar' }, traceForm('proc', String(t.msgId)), actions)),
    h('div', { class: 'grid two' }, summary, mailbox),
    h('div', { class: 'grid two section-gap' }, card('Timeline', timeline(t.timeline)), h('div', null, attempts, changes, snapshot)),
    card('Events produced', eventsTable(t.events, 'No events.'), { attrs: { class: 'card section-gap' } }),
  );
}

async function txTracePage(id) {
  setNav('trace');
  const [t, ev] = await Promise.all([
    api('GET', `/admin/tx-messages/${encodeURIComponent(id)}/trace`),
    api('GET', `/admin/events?sourceKind=txmsg&sourceId=${encodeURIComponent(id)}`),
  ]);
  const m = t.message;
  const actions = [];
  if (m.status === 'DEAD') actions.push(h('button', { class: 'primary', 'data-test': 'trace-resend', onclick: () => resendFlow(m, rerender) }, 'Resend…'));
  actions.push(h('button', { onclick: rerender }, 'Refresh'));
  const checks = t.trace.filter((e) => e.kind === 'check');
  const summary = card('Message', facts([
    ['ID', h('code', null, m.id)],
    ['state', h('span', { 'data-test': 'trace-status' }, badge(m.status))],
    ['topic', h('code', null, m.topic)],
    ['business', m.bizName ? h('span', { 'data-test': 'tx-biz' }, m.bizName) : null],
    ['key', m.key],
    ['created by', m.createdBy ? h('span', { 'data-test': 'tx-created-by' }, m.createdBy) : null],
    m.resentBy ? ['resent', h('span', { 'data-test': 'tx-resent' }, `by ${m.resentBy} `, timeEl(m.resentAt, true))] : null,
    ['check-backs', String(m.checks)],
    ['deliveries', String(m.attempts)],
    ['created', timeEl(m.createdAt, true)],
    ['committed', timeEl(m.committedAt, true)],
    ['delivered', timeEl(m.deliveredAt, true)],
    ['finished', timeEl(m.finishedAt, true)],
    m.nextCheckAt ? ['next check', timeEl(m.nextCheckAt, true)] : null,
    m.nextDeliveryAt ? ['next delivery', timeEl(m.nextDeliveryAt, true)] : null,
    m.deadReason ? ['dead', h('span', { class: 'err' }, `${m.deadPhase ? `${m.deadPhase}: ` : ''}${m.deadReason}`)] : null,
    m.lastError ? ['last error', h('span', { class: 'err' }, m.lastError)] : null,
    m.archived ? ['archived', 'yes'] : null,
  ]));
  const payload = card('Producer and payload', [
    facts([['check URL', h('code', null, m.checkUrl)], ['headers', Object.keys(m.headers ?? {}).length ? h('code', null, JSON.stringify(m.headers)) : null]]),
    h('details', { class: 'section-gap' }, h('summary', null, `Payload (${m.payload.length} characters)`), h('pre', { class: 'raw' }, m.payload)),
    checks.length ? h('p', { class: 'muted small' }, `${checks.length} check-back${checks.length === 1 ? '' : 's'} recorded; see the timeline.`) : null,
  ]);
  view.replaceChildren(
    h('div', { class: 'page-head' }, h('div', null, h('h1', { 'data-test': 'trace-title' }, `Transactional message ${m.id} `, badge(m.status)), h('p', null, `topic ${m.topic}`)), h('div', { class: 'toolbar' }, traceForm('tx', m.id), actions)),
    h('div', { class: 'grid two' }, summary, payload),
    h('div', { class: 'grid two section-gap' }, card('Timeline', timeline(t.trace)), card('Deliveries', eventsTable(ev.items, 'Not delivered yet.'))),
  );
}

// ---------------------------------------------------------------- routing

function go(hash) {
  if (location.hash === hash) rerender();
  else location.hash = hash;
}

async function rerender() {
  clearTimeout(refreshTimer);
  const [path, qs] = (location.hash.replace(/^#/, '') || '/overview').split('?');
  const query = new URLSearchParams(qs ?? '');
  const parts = path.split('/').filter(Boolean);
  try {
    if (parts[0] === 'dead') await deadPage(['proc', 'event', 'txmsg'].includes(parts[1]) ? parts[1] : 'proc', query);
    else if (parts[0] === 'trace' && parts[1] === 'proc' && parts[2]) await procTracePage(decodeURIComponent(parts[2]));
    else if (parts[0] === 'trace' && parts[1] === 'tx' && parts[2]) await txTracePage(decodeURIComponent(parts[2]));
    else if (parts[0] === 'trace') await traceIndexPage();
    else await overviewPage();
  } catch (err) {
    view.replaceChildren(errorBox(err));
    if (parts[0] === 'trace') view.prepend(card(null, traceForm(parts[1], parts[2] ? decodeURIComponent(parts[2]) : '')));
    if (!(err instanceof ApiError)) console.error(err);
  }
  document.body.dataset.ready = path;
}

window.addEventListener('hashchange', rerender);
rerender();
