/** The console's building blocks: badges, tables, cards, facts, toasts, error boxes. */
import { ApiError, BASE } from './api.ts';
import { type Attrs, byId, type Child, h } from './dom.ts';
import { fmtTime } from './format.ts';

export const STATUS_TONE: Readonly<Record<string, string>> = {
  SUCCEEDED: 'ok',
  SENT: 'ok',
  CONSUMED: 'ok',
  DELIVERED: 'ok',
  ok: 'ok',
  done: 'ok',
  DEAD: 'bad',
  failed: 'bad',
  ROLLED_BACK: 'warn',
  FAILED: 'warn',
  DELIVERING: 'info',
  PENDING: 'info',
  PREPARED: 'info',
  COMMITTED: 'info',
  pending: 'warn',
  open: 'info',
  SKIPPED: '',
};

export function badge(status: string | null | undefined, extra?: string): HTMLSpanElement | null {
  if (status === null || status === undefined) return null;
  return h('span', { class: `badge ${STATUS_TONE[status] ?? ''}`, 'data-status': status }, extra ? `${status} ${extra}` : status);
}

/** A time, with the full ISO value as its tooltip; the date only when it is not today (or asked for). */
export function timeEl(iso: string | null | undefined, withDate?: boolean): HTMLSpanElement {
  return iso ? h('span', { class: 'nowrap', title: iso }, fmtTime(iso, withDate)) : h('span', { class: 'muted' }, '—');
}

export function toast(message: string, tone = ''): void {
  const el = h('div', { class: `toast ${tone}` }, message);
  byId('toasts').append(el);
  setTimeout(() => el.remove(), 6000);
}

export interface Column<R> {
  label: string;
  num?: boolean;
  wrap?: boolean;
  render: (row: R) => Child;
}

export interface TableOptions<R> {
  empty?: string;
  attrs?: Attrs;
  rowAttrs?: (row: R) => Attrs;
}

export function table<R>(columns: readonly Column<R>[], rows: readonly R[], opts: TableOptions<R> = {}): HTMLDivElement {
  const head = h(
    'tr',
    null,
    columns.map((c) => h('th', { class: c.num ? 'num' : null }, c.label)),
  );
  const cellClass = (c: Column<R>) => [c.num ? 'num' : '', c.wrap ? 'wrap' : ''].join(' ').trim() || null;
  const body = rows.length
    ? rows.map((r) =>
        h(
          'tr',
          opts.rowAttrs ? opts.rowAttrs(r) : null,
          columns.map((c) => h('td', { class: cellClass(c) }, c.render(r))),
        ),
      )
    : [h('tr', null, h('td', { class: 'empty', colspan: columns.length }, opts.empty ?? 'Nothing here.'))];
  return h('div', { class: 'table-wrap' }, h('table', opts.attrs ?? null, h('thead', null, head), h('tbody', null, body)));
}

export function card(title: string | null, body: Child, opts: { attrs?: Attrs; right?: Child } = {}): HTMLElement {
  return h(
    'section',
    { class: 'card', ...(opts.attrs ?? {}) },
    title ? h('div', { class: 'card-head' }, h('h2', null, title), opts.right ?? null) : null,
    body,
  );
}

/** A definition list; a null pair is left out, a null value shows as a dash. */
export function facts(pairs: readonly (readonly [string, Child] | null)[]): HTMLDListElement {
  return h(
    'dl',
    { class: 'facts' },
    pairs.map((p) => (p ? [h('dt', null, p[0]), h('dd', null, p[1] ?? h('span', { class: 'muted' }, '—'))] : null)),
  );
}

export function errorBox(err: unknown): HTMLDivElement {
  if (err instanceof ApiError && (err.status === 401 || err.status === 403))
    return h(
      'div',
      { class: 'callout bad' },
      h('strong', null, 'Not authorised'),
      'The admin API refused this console. ',
      h('a', { href: '#', onclick: signOut }, 'Sign in again'),
    );
  return h('div', { class: 'callout bad' }, h('strong', null, 'Request failed'), err instanceof Error ? err.message : String(err));
}

function signOut(e?: Event): void {
  e?.preventDefault();
  // The session cookie is HttpOnly: only the server can end it.
  void fetch(`${BASE}/console/logout`, { method: 'POST' }).finally(() => location.reload());
}
