/** The console's writes, each behind a confirmation dialog: replay (with a dry run), resend, pause. */
import { api } from './api.ts';
import { byId, type Child, h } from './dom.ts';
import type { DeadKind, ReplayJson, ResendJson } from './model.ts';
import { errorBox, toast } from './ui.ts';

const dialog = byId<HTMLDialogElement>('dialog');

interface DialogAction {
  label: string;
  tone?: string;
  disabled?: boolean;
  test?: string;
  /** May return a promise: the dialog closes when it resolves and shows the error when it fails. */
  onClick: () => unknown;
}

function openDialog(title: string, body: Child, actions: readonly DialogAction[]): void {
  const button = (a: DialogAction) =>
    h(
      'button',
      {
        type: 'button',
        class: a.tone ?? 'primary',
        disabled: a.disabled,
        'data-test': a.test,
        onclick: async (e: Event) => {
          const btn = e.currentTarget as HTMLButtonElement;
          btn.disabled = true;
          try {
            await a.onClick();
            dialog.close();
          } catch (err) {
            btn.disabled = false;
            dialog.querySelector('.d-body')?.prepend(errorBox(err));
          }
        },
      },
      a.label,
    );
  dialog.replaceChildren(
    h('div', { class: 'd-head' }, h('h2', null, title)),
    h('div', { class: 'd-body' }, body),
    h(
      'div',
      { class: 'd-foot' },
      h('button', { type: 'button', onclick: () => dialog.close(), 'data-test': 'dialog-cancel' }, 'Cancel'),
      actions.map(button),
    ),
  );
  if (!dialog.open) dialog.showModal();
}

export type ReplaySelector = { ids: number[] } | { errorClass: string } | { target: string };

/**
 * Replay with a preview: a dry run first (what would move, what is refused and why, the order
 * warning, docs/console.md "Pages"), then the real replay only on confirmation. Both are audited.
 */
export async function replayFlow(
  kind: Exclude<DeadKind, 'txmsg'>,
  selector: ReplaySelector,
  label: string,
  after?: (r: ReplayJson) => unknown,
): Promise<void> {
  let preview: ReplayJson;
  try {
    preview = await api<ReplayJson>('POST', '/admin/replay', { kind, ...selector, dryRun: true });
  } catch (err) {
    toast(`Dry run failed: ${err instanceof Error ? err.message : String(err)}`, 'bad');
    return;
  }
  const moved = preview.moved ?? [];
  const refused = preview.refused ?? [];
  const warnings = preview.warnings ?? [];
  const noun = kind === 'proc' ? 'message' : 'event';
  const idOf = (m: ReplayJson['moved'][number]) => (kind === 'proc' ? `#${m.msgId}` : `event ${m.eventId}`);
  const body = h(
    'div',
    { 'data-test': 'replay-preview' },
    h('p', null, 'Dry run of ', h('strong', null, label), ': nothing has changed yet.'),
    moved.length
      ? h(
          'div',
          { class: 'callout info' },
          h('strong', null, `${moved.length} ${noun}${moved.length === 1 ? '' : 's'} would go back to PENDING`),
          moved.slice(0, 30).map(idOf).join(', '),
          moved.length > 30 ? ` and ${moved.length - 30} more` : '',
        )
      : h('div', { class: 'callout bad' }, h('strong', null, 'Nothing to replay'), 'No dead or failed item matches.'),
    warnings.map((w) => h('div', { class: 'callout warn', 'data-test': 'replay-warning' }, h('strong', null, 'Order warning'), w)),
    kind === 'proc' && moved.length
      ? h(
          'p',
          { class: 'muted small' },
          'A replayed message is processed again after the messages that arrived since; it does not go back to its place in the original order.',
        )
      : null,
    refused.length
      ? h(
          'div',
          { class: 'callout bad' },
          h('strong', null, `${refused.length} refused`),
          h(
            'ul',
            null,
            refused.slice(0, 20).map((r) => h('li', null, `${r.msgId ? `#${r.msgId}` : `event ${r.eventId ?? ''}`}: ${r.reason}`)),
          ),
        )
      : null,
  );
  openDialog(`Replay ${label}`, body, [
    {
      label: moved.length ? `Replay ${moved.length}` : 'Replay',
      disabled: moved.length === 0,
      test: 'replay-confirm',
      onClick: async () => {
        const r = await api<ReplayJson>('POST', '/admin/replay', { kind, ...selector, dryRun: false });
        toast(
          `Replayed ${r.moved.length} ${noun}${r.moved.length === 1 ? '' : 's'}${r.refused?.length ? `, ${r.refused.length} refused` : ''}`,
          'ok',
        );
        after?.(r);
      },
    },
  ]);
}

export function resendFlow(
  msg: { id: string; deadPhase: string | null; deadReason: string | null },
  after?: (r: ResendJson) => unknown,
): void {
  const back =
    msg.deadPhase === 'check'
      ? 'PREPARED and is checked back with its producer again'
      : 'COMMITTED and is delivered again on a fresh redelivery schedule';
  openDialog(
    `Resend ${msg.id}`,
    h(
      'div',
      null,
      h('p', null, 'The message goes back to ', h('strong', null, back), '.'),
      msg.deadReason ? h('div', { class: 'callout bad' }, h('strong', null, 'Why it died'), msg.deadReason) : null,
      h(
        'div',
        { class: 'callout warn' },
        h('strong', null, 'Order'),
        'Consumers receive it after messages sent while it was dead; they dedupe by msgx-txmsg-id.',
      ),
    ),
    [
      {
        label: 'Resend',
        test: 'resend-confirm',
        onClick: async () => {
          const r = await api<ResendJson>('POST', `/admin/tx-messages/${encodeURIComponent(msg.id)}/resend`);
          toast(`Resent ${r.id}: now ${r.status}`, 'ok');
          after?.(r);
        },
      },
    ],
  );
}

export function pauseFlow(paused: boolean, after?: () => unknown): void {
  openDialog(
    paused ? 'Resume the pipeline' : 'Pause the pipeline',
    h(
      'p',
      null,
      paused
        ? 'Head processing starts again at once.'
        : 'Head processing stops. The ingress keeps accepting and the poller keeps enqueueing; nothing is lost.',
    ),
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
