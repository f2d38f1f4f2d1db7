/** #/overview: the pipeline, its backlog and head, delivery per target, dead letters, the chart. */
import { api } from './api.ts';
import { throughputChart } from './chart.ts';
import { h } from './dom.ts';
import { pauseFlow } from './flows.ts';
import { fmtDuration, fmtTime, n, plural } from './format.ts';
import { REPLAYABLE, type StatsJson, type TargetBacklogJson, type ThroughputJson } from './model.ts';
import { REFRESH_MS, rerender, scheduleRefresh } from './nav.ts';
import { setNav, updatePill, view } from './shell.ts';
import { badge, card, table } from './ui.ts';

/** Dead letters per kind, as the overview and the dead-letter tabs count them. */
export function deadCounts(stats: StatsJson): { proc: number; event: number; txmsg: number } {
  return {
    proc: Object.values(stats.pipeline.deadByClass ?? {}).reduce((a, b) => a + b, 0),
    event: Object.values(stats.deadEvents ?? {}).reduce((a, b) => a + b, 0),
    txmsg: stats.txmsg?.DEAD ?? 0,
  };
}

/** Delivery that is not moving, above everything else: stale targets and topics the cluster lacks. */
function deliveryProblemsCallout(stats: StatsJson): HTMLElement | null {
  const stale = stats.staleTargets ?? [];
  const missing = stats.missingTopics ?? [];
  if (!stale.length && !missing.length) return null;
  return h(
    'div',
    { class: 'callout bad section-gap', 'data-test': 'delivery-problems' },
    h('strong', null, 'Delivery is not moving'),
    stale.length
      ? h(
          'ul',
          null,
          stale.map((t) =>
            h(
              'li',
              { 'data-test': 'stale-target' },
              h('code', null, t.target),
              ` head #${t.headEventId} waiting ${fmtDuration(t.ageSeconds * 1000)}`,
              t.stalledSeconds != null
                ? ` · stalled ${fmtDuration(t.stalledSeconds * 1000)} (destination unreachable)`
                : ` · ${t.headAttempts} attempts`,
              t.reason ? [' · ', h('span', { class: 'err' }, t.reason)] : null,
            ),
          ),
        )
      : null,
    missing.length
      ? h(
          'ul',
          null,
          missing.map((m) =>
            h(
              'li',
              { 'data-test': 'missing-topic' },
              'Kafka topic ',
              h('code', null, m.topic),
              ` does not exist (target ${m.target}${m.open ? `, ${m.open} events waiting` : ''})`,
            ),
          ),
        )
      : null,
  );
}

const kpi = (...body: Parameters<typeof card>[1][]) => card(null, body, { attrs: { class: 'card kpi' } });

function kpis(stats: StatsJson): HTMLElement {
  const p = stats.pipeline;
  const head = p.head;
  const dead = deadCounts(stats);
  return h(
    'div',
    { class: 'grid kpis' },
    kpi(
      h('div', { class: 'label' }, 'Pipeline'),
      h('div', { class: 'value', 'data-test': 'pipeline-state' }, stats.paused ? 'Paused' : 'Running'),
      h('div', { class: 'sub' }, stats.paused ? 'no head processing; ingress still accepts' : 'processing the FIFO head'),
      h(
        'div',
        { class: 'actions' },
        h(
          'button',
          { class: stats.paused ? 'primary' : '', 'data-test': 'pause-toggle', onclick: () => pauseFlow(stats.paused, rerender) },
          stats.paused ? 'Resume' : 'Pause',
        ),
      ),
    ),
    kpi(
      h('div', { class: 'label' }, 'Backlog'),
      h('div', { class: 'value', 'data-test': 'backlog' }, n(p.backlog)),
      h('div', { class: 'sub' }, `${n(p.byStatus?.PENDING)} pending · ${n(p.byStatus?.FAILED)} failed (retrying)`),
    ),
    kpi(
      h('div', { class: 'label' }, 'Head message'),
      head
        ? [
            h('div', { class: 'value' }, h('a', { href: `#/trace/proc/${head.msgId}` }, `#${head.msgId}`), ' ', badge(head.status)),
            h(
              'div',
              { class: 'sub', 'data-test': 'head-age' },
              `age ${fmtDuration(head.ageSeconds * 1000)} · attempts ${head.attempts}${head.errorClass ? ` · ${head.errorClass}` : ''}`,
            ),
          ]
        : [h('div', { class: 'value muted' }, 'empty'), h('div', { class: 'sub' }, 'nothing waiting')],
    ),
    kpi(
      h('div', { class: 'label' }, 'Mailbox order'),
      h('div', { class: 'value', 'data-test': 'mailbox-holes' }, n(stats.ordering?.holesDeclared)),
      h(
        'div',
        { class: 'sub' },
        `IDs given up as holes · ${n(stats.ordering?.lateRows)} late · ${n(stats.ordering?.gapsWaiting)} gap(s) waited for · frontier #${stats.ordering?.accounted ?? 0}`,
      ),
    ),
    kpi(
      h('div', { class: 'label' }, 'Dead letters'),
      h('div', { class: 'value', 'data-test': 'dead-total' }, n(dead.proc + dead.event + dead.txmsg)),
      h(
        'div',
        { class: 'sub' },
        h('a', { href: '#/dead/proc' }, plural(dead.proc, 'message')),
        ' · ',
        h('a', { href: '#/dead/event' }, plural(dead.event, 'event')),
        ' · ',
        h('a', { href: '#/dead/txmsg' }, `${n(dead.txmsg)} tx`),
      ),
    ),
  );
}

function chartCard(tp: ThroughputJson): HTMLElement {
  const t = tp.totals;
  return card(
    'Throughput and latency, last hour',
    [
      throughputChart(tp),
      h(
        'div',
        { class: 'legend' },
        h('span', null, h('i', { class: 'lg-bar' }), 'finished / min'),
        h('span', null, h('i', { class: 'lg-dead' }), 'dead / min'),
        h('span', null, h('i', { class: 'lg-lat' }), 'p95 latency (enqueued → finished)'),
      ),
    ],
    {
      right: h(
        'span',
        { class: 'muted small', 'data-test': 'throughput-totals' },
        `${n(t.processed)} finished · avg ${fmtDuration(t.latencyAvgMs)} · p95 ${fmtDuration(t.latencyP95Ms)}`,
      ),
    },
  );
}

/** Stalled = held by an outage of its destination (no attempt spent); the reason is the badge's
 *  tooltip, and in full in the "Delivery is not moving" callout above. */
function headCell(r: TargetBacklogJson) {
  if (r.stalledSeconds != null)
    return [
      String(r.headEventId),
      ' ',
      h(
        'span',
        { class: 'badge bad', 'data-test': 'target-stalled', title: r.headLastError ?? '' },
        `STALLED ${fmtDuration(r.stalledSeconds * 1000)}`,
      ),
    ];
  if (r.headAttempts)
    return [
      String(r.headEventId),
      ' ',
      h('span', { class: 'badge warn', 'data-status': 'FAILED', title: r.headLastError ?? '' }, `FAILED ×${r.headAttempts}`),
    ];
  return String(r.headEventId);
}

function eventsCard(stats: StatsJson): HTMLElement {
  return card(
    'Events pending per target',
    table<TargetBacklogJson>(
      [
        { label: 'target', render: (r) => h('code', null, r.target) },
        { label: 'pending', num: true, render: (r) => n(r.pending) },
        { label: 'delivering', num: true, render: (r) => n(r.delivering) },
        { label: 'head', num: true, render: headCell },
        { label: 'oldest', num: true, render: (r) => fmtDuration((r.oldestAgeSeconds ?? 0) * 1000) },
        {
          label: 'dead',
          num: true,
          render: (r) => (r.dead ? h('a', { href: `#/dead/event?target=${encodeURIComponent(r.target)}` }, n(r.dead)) : '0'),
        },
      ],
      stats.events ?? [],
      { empty: 'Every event is delivered.', attrs: { 'data-test': 'events-table' } },
    ),
  );
}

type Count = readonly [string, number];

function countCards(stats: StatsJson): HTMLElement[] {
  const p = stats.pipeline;
  const deadClasses = card(
    'Dead messages per class',
    table<Count>(
      [
        { label: 'class', render: (r) => h('a', { href: `#/dead/proc?errorClass=${r[0]}` }, r[0]) },
        {
          label: 'replay',
          render: (r) =>
            REPLAYABLE.includes(r[0])
              ? h('span', { class: 'badge ok' }, 'replayable')
              : h('span', { class: 'badge' }, 'needs a fixed message'),
        },
        { label: 'count', num: true, render: (r) => n(r[1]) },
      ],
      Object.entries(p.deadByClass ?? {}),
      { empty: 'No dead messages.', attrs: { 'data-test': 'dead-classes' } },
    ),
  );
  const byStatus = card(
    'Messages per state',
    table<Count>(
      [
        { label: 'state', render: (r) => badge(r[0]) },
        { label: 'count', num: true, render: (r) => n(r[1]) },
      ],
      ['PENDING', 'FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD'].flatMap((k): Count[] =>
        p.byStatus?.[k] !== undefined ? [[k, p.byStatus[k]]] : [],
      ),
      { empty: 'No messages yet.' },
    ),
  );
  const tx = card(
    'Transactional messages per state',
    table<Count>(
      [
        { label: 'state', render: (r) => (r[0] === 'DEAD' ? h('a', { href: '#/dead/txmsg' }, badge(r[0])) : badge(r[0])) },
        { label: 'count', num: true, render: (r) => n(r[1]) },
      ],
      Object.entries(stats.txmsg ?? {}),
      { empty: 'No transactional messages.', attrs: { 'data-test': 'tx-states' } },
    ),
  );
  return [deadClasses, byStatus, tx];
}

export async function overviewPage(): Promise<void> {
  setNav('overview');
  const [stats, tp] = await Promise.all([
    api<StatsJson>('GET', '/admin/stats'),
    api<ThroughputJson>('GET', '/admin/throughput?minutes=60'),
  ]);
  updatePill(stats.paused);
  view.replaceChildren(
    h(
      'div',
      { class: 'page-head' },
      h('div', null, h('h1', null, 'Overview'), h('p', null, `As of ${fmtTime(stats.at, true)} · refreshes every ${REFRESH_MS / 1000} s`)),
    ),
    kpis(stats),
    deliveryProblemsCallout(stats) ?? '',
    h('div', { class: 'grid two section-gap' }, chartCard(tp), eventsCard(stats)),
    h('div', { class: 'grid three section-gap' }, ...countCards(stats)),
  );
  scheduleRefresh();
}
