/** The dead-letter table of each kind: its rows' ID, columns and row actions. */
import { h } from './dom.ts';
import { replayFlow, resendFlow } from './flows.ts';
import { type DeadKind, type DeadRows, REPLAYABLE } from './model.ts';
import { badge, type Column, timeEl } from './ui.ts';

export interface DeadKindSpec<R> {
  idOf: (row: R) => number | string;
  /** Whether a row may be selected for the bulk action. */
  selectable: (row: R) => boolean;
  /** The columns after the selection checkbox. */
  columns: (reload: () => void) => Column<R>[];
}

export type DeadSpecs = { [K in DeadKind]: DeadKindSpec<DeadRows[K]> };

function sourceLink(kind: string | null, id: string | null): HTMLElement {
  if (!id) return h('span', { class: 'muted' }, kind ?? '—');
  if (kind === 'proc') return h('a', { href: `#/trace/proc/${id}` }, `message #${id}`);
  if (kind === 'txmsg') return h('a', { href: `#/trace/tx/${encodeURIComponent(id)}` }, `tx ${id}`);
  return h('span', { class: 'muted' }, `${kind}:${id}`);
}

const replayable = (errorClass: string | null) => errorClass !== null && REPLAYABLE.includes(errorClass);

export const DEAD_SPECS: DeadSpecs = {
  proc: {
    idOf: (r) => r.msg_id,
    selectable: (r) => replayable(r.error_class),
    columns: (reload) => [
      { label: 'message', render: (r) => h('a', { href: `#/trace/proc/${r.msg_id}`, 'data-test': 'trace-link' }, `#${r.msg_id}`) },
      {
        label: 'type',
        render: (r) => (r.msg_type ? `${r.msg_type}${r.msg_subtype ? `/${r.msg_subtype}` : ''}` : h('span', { class: 'muted' }, '—')),
      },
      { label: 'state', render: (r) => badge(r.status) },
      { label: 'class', render: (r) => h('code', null, r.error_class ?? '') },
      { label: 'reason', wrap: true, render: (r) => h('span', { class: 'err' }, r.error_detail ?? '') },
      { label: 'attempts', num: true, render: (r) => String(r.attempts) },
      { label: 'finished', render: (r) => timeEl(r.finished_at ?? r.updated_at) },
      {
        label: '',
        render: (r) =>
          replayable(r.error_class)
            ? h(
                'button',
                {
                  class: 'small',
                  'data-test': 'replay-one',
                  onclick: () => replayFlow('proc', { ids: [r.msg_id] }, `message #${r.msg_id}`, reload),
                },
                'Replay…',
              )
            : h('span', { class: 'muted small', title: 'MALFORMED and PROTOCOL need a corrected message from upstream' }, 'fix upstream'),
      },
    ],
  },
  event: {
    idOf: (r) => r.eventId,
    selectable: () => true,
    columns: (reload) => [
      { label: 'event', render: (r) => String(r.eventId) },
      { label: 'target', render: (r) => h('code', null, r.target) },
      { label: 'type', render: (r) => r.type },
      { label: 'key', render: (r) => r.key ?? '—' },
      { label: 'version', num: true, render: (r) => r.stateVersion ?? '—' },
      { label: 'source', render: (r) => sourceLink(r.sourceKind, r.sourceId) },
      { label: 'last error', wrap: true, render: (r) => h('span', { class: 'err' }, r.lastError ?? '') },
      { label: 'attempts', num: true, render: (r) => String(r.attempts) },
      { label: 'dead at', render: (r) => timeEl(r.deadAt) },
      {
        label: '',
        render: (r) =>
          h(
            'button',
            {
              class: 'small',
              'data-test': 'replay-one',
              onclick: () => replayFlow('event', { ids: [r.eventId] }, `event ${r.eventId}`, reload),
            },
            'Replay…',
          ),
      },
    ],
  },
  txmsg: {
    idOf: (r) => r.id,
    selectable: () => true,
    columns: (reload) => [
      {
        label: 'message',
        render: (r) => h('a', { href: `#/trace/tx/${encodeURIComponent(r.id)}`, 'data-test': 'trace-link' }, h('code', null, r.id)),
      },
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
      {
        label: '',
        render: (r) => h('button', { class: 'small', 'data-test': 'resend-one', onclick: () => resendFlow(r, reload) }, 'Resend…'),
      },
    ],
  },
};
