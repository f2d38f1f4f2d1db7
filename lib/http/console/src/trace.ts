/** What both traces share: the timeline, the events table and the trace form; and #/trace itself. */
import { h } from './dom.ts';
import { fmtTime } from './format.ts';
import type { TimelineEntryJson, TraceEventJson } from './model.ts';
import { go } from './nav.ts';
import { setNav, view } from './shell.ts';
import { badge, card, type Column, STATUS_TONE, table, timeEl } from './ui.ts';

const KIND_TONE: Readonly<Record<string, string>> = {
  'flight-change': 'info',
  published: 'ok',
  sent: 'ok',
  ack: 'ok',
  commit: 'ok',
  backfill: 'ok',
  consumed: 'ok',
  'publish-failed': 'bad',
  'event-dead': 'bad',
  dead: 'bad',
  'delivery-failed': 'bad',
  'backfill-pending': 'warn',
  replay: 'warn',
  resend: 'warn',
  rollback: 'warn',
  check: 'info',
  enqueue: 'info',
  enqueued: 'info',
  received: 'info',
  prepare: 'info',
  event: 'info',
  snapshot: 'info',
  redeliver: 'warn',
};

const detailText = (v: unknown) => (Array.isArray(v) ? v.join(', ') : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** One timeline renderer for both traces: entries are {seq, at, kind, status, detail}. */
export function timeline(entries: readonly TimelineEntryJson[]): HTMLElement {
  if (!entries.length) return h('p', { class: 'muted' }, 'Nothing recorded yet.');
  return h(
    'ol',
    { class: 'timeline', 'data-test': 'timeline' },
    entries.map((e) => {
      const tone = e.kind === 'attempt' ? (STATUS_TONE[e.status ?? ''] ?? '') : (KIND_TONE[e.kind] ?? '');
      const detail = Object.entries(e.detail ?? {}).filter(
        ([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0),
      );
      return h(
        'li',
        { class: tone, 'data-kind': e.kind },
        h('span', { class: 'dot' }),
        h(
          'div',
          { class: 'tl-head' },
          h('span', { class: 'tl-time', title: e.at }, fmtTime(e.at)),
          h('span', { class: 'tl-kind' }, e.kind),
          e.status ? badge(e.status) : null,
        ),
        detail.length
          ? h(
              'div',
              { class: 'tl-detail' },
              detail.map(([k, v]) => h('span', null, h('span', { class: 'muted' }, `${k} `), detailText(v))),
            )
          : null,
      );
    }),
  );
}

function publishers(e: TraceEventJson) {
  if (!e.deliveries.length) return h('span', { class: 'muted small' }, e.status === 'SENT' ? 'sent with a newer version' : 'not yet');
  return e.deliveries.map((d) =>
    h(
      'div',
      { class: 'small nowrap' },
      badge(d.outcome),
      ' ',
      h('code', null, d.publisher),
      d.partition !== null ? ` p${d.partition}` : '',
      d.offset !== null ? ` @${d.offset}` : '',
      d.tries > 1 ? ` (${d.tries} tries)` : '',
      d.error ? h('div', { class: 'err small' }, d.error) : null,
    ),
  );
}

export function eventsTable(events: readonly TraceEventJson[], empty: string): HTMLElement {
  const versioned = events.some((e) => e.stateVersion !== null);
  const columns: (Column<TraceEventJson> | null)[] = [
    { label: 'event', render: (e) => String(e.eventId) },
    { label: 'target', render: (e) => h('code', null, e.target) },
    { label: 'type', render: (e) => e.type },
    { label: 'key', render: (e) => e.key ?? '—' },
    versioned ? { label: 'version', num: true, render: (e) => e.stateVersion ?? '—' } : null,
    {
      label: 'state',
      render: (e) => [
        badge(e.status),
        e.sentAs && e.sentAs !== e.eventId ? h('div', { class: 'muted small' }, `as event ${e.sentAs}`) : null,
      ],
    },
    { label: 'publishers', render: publishers },
    { label: 'attempts', num: true, render: (e) => String(e.attempts) },
    { label: 'sent', render: (e) => timeEl(e.sentAt ?? e.deadAt) },
  ];
  return table(
    columns.filter((c): c is Column<TraceEventJson> => c !== null),
    events,
    { empty, attrs: { 'data-test': 'events' } },
  );
}

export function traceForm(kind?: string, id?: string): HTMLFormElement {
  const input = h('input', { type: 'text', placeholder: 'mailbox ID or tx message ID', value: id ?? '', 'data-test': 'trace-input' });
  const sel = h(
    'select',
    { 'data-test': 'trace-kind' },
    h('option', { value: 'proc', selected: kind !== 'tx' }, 'inbound message'),
    h('option', { value: 'tx', selected: kind === 'tx' }, 'transactional message'),
  );
  const open = (e: Event) => {
    e.preventDefault();
    if (input.value.trim()) go(`#/trace/${sel.value}/${encodeURIComponent(input.value.trim())}`);
  };
  return h('form', { class: 'trace-form', onsubmit: open }, sel, input, h('button', { type: 'submit', class: 'primary' }, 'Open trace'));
}

export async function traceIndexPage(): Promise<void> {
  setNav('trace');
  view.replaceChildren(
    h(
      'div',
      { class: 'page-head' },
      h(
        'div',
        null,
        h('h1', null, 'Trace'),
        h(
          'p',
          null,
          'The recorded path of one message: attempts, flight changes, events and their publishers, the mailbox backfill; or a transactional message from prepare to ack.',
        ),
      ),
    ),
    card(null, traceForm('proc')),
  );
}
