/** #/dead/{proc|event|txmsg}: dead letters of each kind, filters, and replay or resend (one or in bulk). */
import { api } from './api.ts';
import { type DeadKindSpec, DEAD_SPECS } from './deadColumns.ts';
import { type Child, h } from './dom.ts';
import { replayFlow } from './flows.ts';
import { n } from './format.ts';
import { CLASSES, type DeadKind, type DeadListJson, type DeadRows, REPLAYABLE, type StatsJson } from './model.ts';
import { go, rerender } from './nav.ts';
import { deadCounts } from './overview.ts';
import { setNav, updatePill, view } from './shell.ts';
import { card, table, toast } from './ui.ts';

const HELP: Record<DeadKind, string> = {
  proc: 'Messages that processing gave up on. CODEC_ERROR, UNSUPPORTED, INFRA and EXHAUSTED can be replayed once the cause is fixed; MALFORMED and PROTOCOL need a corrected message from upstream.',
  event: 'Events the relay gave up on after its retries. A replayed event keeps its event ID, so consumers can dedupe it.',
  txmsg: 'Transactional messages that died unconfirmed (check-back) or undelivered. Resend puts them back to PREPARED or COMMITTED.',
};

function deadTabs(active: DeadKind, counts: Record<DeadKind, number>): HTMLElement {
  const tab = (k: DeadKind, label: string) =>
    h(
      'a',
      { href: `#/dead/${k}`, class: k === active ? 'active' : null, 'data-test': `tab-${k}` },
      label,
      counts?.[k] !== undefined ? h('span', { class: 'badge count' }, n(counts[k])) : null,
    );
  return h('div', { class: 'tabs' }, tab('proc', 'Processing'), tab('event', 'Events'), tab('txmsg', 'Transactional'));
}

/** One resend per message: each is its own audited transition. */
async function resendAll(ids: readonly (string | number)[]): Promise<void> {
  let ok = 0;
  for (const id of ids) {
    try {
      await api('POST', `/admin/tx-messages/${encodeURIComponent(id)}/resend`);
      ok++;
    } catch (err) {
      toast(`${id}: ${err instanceof Error ? err.message : String(err)}`, 'bad');
    }
  }
  toast(`Resent ${ok} of ${ids.length}`, ok ? 'ok' : 'bad');
}

/** The class filter (proc) or the target filter (event), with "replay all" for the chosen one. */
function filters(
  kind: DeadKind,
  query: URLSearchParams,
  stats: StatsJson,
  items: readonly DeadRows[DeadKind][],
  reload: () => void,
): Child[] {
  const out: Child[] = [];
  const selected = (e: Event) => (e.target as HTMLSelectElement).value;
  if (kind === 'proc') {
    const sel = h(
      'select',
      { 'data-test': 'class-filter', onchange: (e: Event) => go(`#/dead/proc${selected(e) ? `?errorClass=${selected(e)}` : ''}`) },
      h('option', { value: '' }, 'every class'),
      CLASSES.map((c) => h('option', { value: c, selected: query.get('errorClass') === c }, c)),
    );
    out.push(h('label', { class: 'inline' }, 'class', sel));
    const cls = query.get('errorClass');
    if (cls && REPLAYABLE.includes(cls))
      out.push(
        h(
          'button',
          { 'data-test': 'replay-class', onclick: () => replayFlow('proc', { errorClass: cls }, `every ${cls} message`, reload) },
          `Replay all ${cls}…`,
        ),
      );
  }
  if (kind === 'event') {
    const targets = [
      ...new Set([
        'msg',
        'schd',
        ...(stats.events ?? []).map((t) => t.target),
        ...Object.keys(stats.deadEvents ?? {}),
        ...(items as DeadRows['event'][]).map((i) => i.target),
      ]),
    ];
    const sel = h(
      'select',
      {
        'data-test': 'target-filter',
        onchange: (e: Event) => go(`#/dead/event${selected(e) ? `?target=${encodeURIComponent(selected(e))}` : ''}`),
      },
      h('option', { value: '' }, 'every target'),
      targets.map((t) => h('option', { value: t, selected: query.get('target') === t }, t)),
    );
    out.push(h('label', { class: 'inline' }, 'target', sel));
    const tgt = query.get('target');
    if (tgt)
      out.push(
        h('button', { onclick: () => replayFlow('event', { target: tgt }, `every dead event of ${tgt}`, reload) }, `Replay all of ${tgt}…`),
      );
  }
  return out;
}

export async function deadPage(kind: DeadKind, query: URLSearchParams): Promise<void> {
  setNav('dead');
  const params = new URLSearchParams({ kind, limit: '500' });
  const errorClass = query.get('errorClass');
  const target = query.get('target');
  if (kind === 'proc' && errorClass) params.set('errorClass', errorClass);
  if (kind === 'event' && target) params.set('target', target);
  const [list, stats] = await Promise.all([
    api<DeadListJson<typeof kind>>('GET', `/admin/dead?${params}`),
    api<StatsJson>('GET', '/admin/stats'),
  ]);
  updatePill(stats.paused);
  const items = list.items ?? [];
  const reload = () => void rerender();
  const spec = DEAD_SPECS[kind] as DeadKindSpec<DeadRows[DeadKind]>;

  const selected = new Set<number | string>();
  const search = h('input', { type: 'search', placeholder: 'filter rows…', 'data-test': 'dead-search', value: query.get('q') ?? '' });
  const tableHost = h('div', null);
  const bulk = h(
    'button',
    { class: 'primary', disabled: true, 'data-test': 'bulk-action' },
    kind === 'txmsg' ? 'Resend selected' : 'Replay selected',
  );
  const check = (r: DeadRows[DeadKind]) =>
    h('input', {
      type: 'checkbox',
      'aria-label': `select ${spec.idOf(r)}`,
      disabled: !spec.selectable(r),
      onchange: (e: Event) => {
        if ((e.target as HTMLInputElement).checked) selected.add(spec.idOf(r));
        else selected.delete(spec.idOf(r));
        bulk.disabled = selected.size === 0;
        bulk.textContent = `${kind === 'txmsg' ? 'Resend' : 'Replay'} selected${selected.size ? ` (${selected.size})` : ''}`;
      },
    });
  const columns = [{ label: '', render: check }, ...spec.columns(reload)];

  const draw = () => {
    const q = search.value.trim().toLowerCase();
    const rows = q ? items.filter((r) => JSON.stringify(r).toLowerCase().includes(q)) : items;
    tableHost.replaceChildren(
      table(columns, rows, {
        empty: q ? 'No row matches the filter.' : 'No dead letters here.',
        attrs: { 'data-test': 'dead-table' },
        rowAttrs: (r) => ({ 'data-id': spec.idOf(r) }),
      }),
    );
  };
  search.addEventListener('input', draw);
  draw();

  bulk.addEventListener('click', async () => {
    const ids = [...selected];
    if (kind === 'txmsg') {
      await resendAll(ids);
      reload();
    } else
      void replayFlow(
        kind,
        { ids: ids.map(Number) },
        `${ids.length} selected ${kind === 'proc' ? 'message' : 'event'}${ids.length === 1 ? '' : 's'}`,
        reload,
      );
  });

  view.replaceChildren(
    h('div', { class: 'page-head' }, h('div', null, h('h1', null, 'Dead letters'), h('p', null, HELP[kind]))),
    deadTabs(kind, deadCounts(stats)),
    card(null, [
      h(
        'div',
        { class: 'toolbar' },
        filters(kind, query, stats, items, reload),
        search,
        h('span', { class: 'spacer' }),
        h('span', { class: 'muted small' }, `${items.length} shown`),
        bulk,
      ),
      tableHost,
    ]),
  );
}
