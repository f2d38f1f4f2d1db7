/** #/trace/tx/{id}: a transactional message from prepare to ack, with its deliveries. */
import { api } from './api.ts';
import { h } from './dom.ts';
import { resendFlow } from './flows.ts';
import type { SourceEventsJson, TxMessageJson, TxTraceJson } from './model.ts';
import { rerender } from './nav.ts';
import { setNav, view } from './shell.ts';
import { eventsTable, timeline, traceForm } from './trace.ts';
import { badge, card, facts, timeEl } from './ui.ts';

function summary(m: TxMessageJson): HTMLElement {
  return card(
    'Message',
    facts([
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
    ]),
  );
}

function payloadCard(m: TxMessageJson, checks: number): HTMLElement {
  return card('Producer and payload', [
    facts([
      ['check URL', h('code', null, m.checkUrl)],
      ['headers', Object.keys(m.headers ?? {}).length ? h('code', null, JSON.stringify(m.headers)) : null],
    ]),
    h(
      'details',
      { class: 'section-gap' },
      h('summary', null, `Payload (${m.payload.length} characters)`),
      h('pre', { class: 'raw' }, m.payload),
    ),
    checks ? h('p', { class: 'muted small' }, `${checks} check-back${checks === 1 ? '' : 's'} recorded; see the timeline.`) : null,
  ]);
}

export async function txTracePage(id: string): Promise<void> {
  setNav('trace');
  const [t, ev] = await Promise.all([
    api<TxTraceJson>('GET', `/admin/tx-messages/${encodeURIComponent(id)}/trace`),
    api<SourceEventsJson>('GET', `/admin/events?sourceKind=txmsg&sourceId=${encodeURIComponent(id)}`),
  ]);
  const m = t.message;
  const actions: HTMLElement[] = [];
  if (m.status === 'DEAD')
    actions.push(h('button', { class: 'primary', 'data-test': 'trace-resend', onclick: () => resendFlow(m, rerender) }, 'Resend…'));
  actions.push(h('button', { onclick: () => rerender() }, 'Refresh'));
  const checks = t.trace.filter((e) => e.kind === 'check').length;
  view.replaceChildren(
    h(
      'div',
      { class: 'page-head' },
      h(
        'div',
        null,
        h('h1', { 'data-test': 'trace-title' }, `Transactional message ${m.id} `, badge(m.status)),
        h('p', null, `topic ${m.topic}`),
      ),
      h('div', { class: 'toolbar' }, traceForm('tx', m.id), actions),
    ),
    h('div', { class: 'grid two' }, summary(m), payloadCard(m, checks)),
    h(
      'div',
      { class: 'grid two section-gap' },
      card('Timeline', timeline(t.trace)),
      card('Deliveries', eventsTable(ev.items, 'Not delivered yet.')),
    ),
  );
}
