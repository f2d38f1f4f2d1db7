/** #/trace/proc/{msgId}: the recorded path of one inbound message (GET /admin/trace/{msgId}). */
import { api } from './api.ts';
import { h } from './dom.ts';
import { replayFlow } from './flows.ts';
import { fmtDuration, fmtTime } from './format.ts';
import { type MessageTraceJson, REPLAYABLE, type SnapshotRowJson } from './model.ts';
import { rerender } from './nav.ts';
import { setNav, view } from './shell.ts';
import { eventsTable, timeline, traceForm } from './trace.ts';
import { badge, card, facts, table, timeEl } from './ui.ts';

function summary(t: MessageTraceJson): HTMLElement {
  const m = t.message;
  return card(
    'Message',
    facts([
      ['mailbox ID', h('code', null, String(t.msgId))],
      ['state', h('span', { 'data-test': 'trace-status' }, badge(m.status))],
      ['identity', m.identity ? h('code', null, m.identity) : null],
      ['type', m.type ? `${m.type}${m.subtype ? ` / ${m.subtype}` : ''}` : null],
      ['attempts', String(m.attempts)],
      m.errorClass
        ? ['error', h('span', null, h('code', null, m.errorClass), ' ', h('span', { class: 'err' }, m.errorDetail ?? ''))]
        : null,
      m.note ? ['note', m.note] : null,
      ['received', timeEl(m.receivedAt, true)],
      ['enqueued', timeEl(m.enqueuedAt, true)],
      ['finished', timeEl(m.finishedAt, true)],
      ['latency', fmtDuration(m.latencyMs)],
      m.nextAttemptAt ? ['next attempt', timeEl(m.nextAttemptAt, true)] : null,
      m.archived ? ['archived', 'yes (proc_state_hst)'] : null,
    ]),
  );
}

function mailboxCard(t: MessageTraceJson): HTMLElement {
  const b = t.backfill;
  const mb = t.mailbox;
  const present =
    mb.present === null
      ? mb.error
        ? h('span', { class: 'err' }, mb.error)
        : 'not asked'
      : mb.present
        ? 'yes'
        : 'purged by its owner (our copy is kept)';
  return card('Mailbox and backfill', [
    facts([
      ['row', `CMINMSGS.ID ${mb.id}`],
      ['in the mailbox', present],
      ['marked processed', mb.processed === null ? '—' : mb.processed ? 'yes' : 'no'],
      ['backfill', h('span', { 'data-test': 'backfill-state' }, badge(b.state))],
      b.procStatus ? ['PROC_STATUS', h('code', null, b.procStatus)] : null,
      b.procNote ? ['PROC_NOTE', b.procNote] : null,
      b.processedAt ? ['DATE_PROCESSED', timeEl(b.processedAt, true)] : null,
      b.state === 'pending' ? ['retries', `${b.attempts}, next ${fmtTime(b.nextAttemptAt)}`] : null,
      b.lastError ? ['last error', h('span', { class: 'err' }, b.lastError)] : null,
    ]),
    mb.rawText
      ? h(
          'details',
          { class: 'section-gap' },
          h('summary', null, `Raw text (${mb.rawText.length} characters)`),
          h('pre', { class: 'raw' }, mb.rawText),
        )
      : null,
  ]);
}

function workCards(t: MessageTraceJson): HTMLElement {
  const attempts = card(
    'Processing attempts',
    table(
      [
        { label: '#', render: (a) => String(t.attempts.indexOf(a) + 1) },
        { label: 'outcome', render: (a) => badge(a.outcome) },
        { label: 'class', render: (a) => (a.errorClass ? h('code', null, a.errorClass) : '—') },
        { label: 'reason', wrap: true, render: (a) => h('span', { class: 'err' }, a.errorDetail ?? '') },
        { label: 'at', render: (a) => timeEl(a.finishedAt, true) },
      ],
      t.attempts,
      { empty: 'Not attempted yet.', attrs: { 'data-test': 'attempts' } },
    ),
  );
  const changes = card(
    'Flight changes',
    table(
      [
        { label: 'flight', render: (c) => h('code', null, c.flid) },
        { label: 'day', render: (c) => c.opdy ?? '—' },
        { label: 'change', render: (c) => badge(c.change.toUpperCase()) },
        { label: 'version', render: (c) => (c.fromVersion ? `${c.fromVersion} → ${c.toVersion}` : `new, ${c.toVersion}`) },
        { label: 'fields', wrap: true, render: (c) => (c.fields.length ? c.fields.join(', ') : '—') },
      ],
      t.flightChanges,
      {
        empty: t.message.status === 'SUCCEEDED' ? 'No flight changed (the message changed nothing).' : 'No flight changed.',
        attrs: { 'data-test': 'flight-changes' },
      },
    ),
  );
  const snapshot = t.snapshot.length
    ? card(
        'Snapshot package',
        table<SnapshotRowJson>(
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
        ),
      )
    : null;
  return h('div', null, attempts, changes, snapshot);
}

export async function procTracePage(id: string): Promise<void> {
  setNav('trace');
  const t = await api<MessageTraceJson>('GET', `/admin/trace/${encodeURIComponent(id)}`);
  const m = t.message;
  const actions: HTMLElement[] = [];
  if ((m.status === 'DEAD' || m.status === 'FAILED') && m.errorClass !== null && REPLAYABLE.includes(m.errorClass))
    actions.push(
      h(
        'button',
        {
          class: 'primary',
          'data-test': 'trace-replay',
          onclick: () => replayFlow('proc', { ids: [m.msgId] }, `message #${m.msgId}`, rerender),
        },
        'Replay…',
      ),
    );
  actions.push(h('button', { onclick: () => rerender() }, 'Refresh'));

  view.replaceChildren(
    h(
      'div',
      { class: 'page-head' },
      h(
        'div',
        null,
        h('h1', { 'data-test': 'trace-title' }, `Message #${t.msgId} `, badge(m.status)),
        h('p', null, m.identity ?? 'identity not bound (never decoded)'),
      ),
      h('div', { class: 'toolbar' }, traceForm('proc', String(t.msgId)), actions),
    ),
    h('div', { class: 'grid two' }, summary(t), mailboxCard(t)),
    h('div', { class: 'grid two section-gap' }, card('Timeline', timeline(t.timeline)), workCards(t)),
    card('Events produced', eventsTable(t.events, 'No events.'), { attrs: { class: 'card section-gap' } }),
  );
}
