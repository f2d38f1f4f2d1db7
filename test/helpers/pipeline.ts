import { loadConfig } from '../../lib/config/config.ts';
import type { Db } from '../../lib/db/db.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { silentLog } from '../../lib/observability/logger.ts';
import { ProcessorRegistry } from '../../lib/pipeline/processor.ts';
import { pumpOnce, type PumpStep } from '../../lib/pipeline/pump.ts';
import { pollOnce } from '../../lib/pipeline/poller.ts';
import { type Clock, FakeClock } from '../../lib/shared/clock.ts';
import type { AppContext } from '../../lib/app/context.ts';

/** An AppContext over real databases with a fake clock (unless one is given). */
export function makeContext(o: {
  db: Db;
  mailbox: Mailbox;
  clock?: Clock;
  env?: Record<string, string>;
  registry?: ProcessorRegistry;
}): AppContext & { clock: Clock } {
  return {
    config: loadConfig({ MSGX_RUNTIME: 'twin', ...o.env }),
    db: o.db,
    mailbox: o.mailbox,
    clock: o.clock ?? new FakeClock('2026-11-29T00:00:00Z'),
    log: silentLog,
    registry: o.registry ?? new ProcessorRegistry(),
  };
}

/** Runs the pump until it is idle, paused or waiting on a FAILED head; returns the last step. */
export async function drainPump(ctx: AppContext, maxSteps = 10_000): Promise<PumpStep> {
  let last: PumpStep = { kind: 'idle' };
  for (let i = 0; i < maxSteps; i++) {
    last = await pumpOnce(ctx);
    if (last.kind !== 'processed') return last;
  }
  throw new Error(`pump still busy after ${maxSteps} steps`);
}

/** Polls the mailbox until nothing new is found. */
export async function drainPoller(ctx: AppContext): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await pollOnce(ctx);
    total += r.enqueued;
    if (!r.more) return total;
  }
}

/** A wire message with the given META and body. */
export function wire(meta: { SNDR?: string; TYPE: string; STYP?: string; SEQN: string | number; DTTM?: string }, body = ''): string {
  const m = { SNDR: 'FIMS', RCVR: 'MSGX', DTTM: '20261129083000', ...meta };
  const metaXml = Object.entries(m)
    .map(([k, v]) => `<${k}>${v}</${k}>`)
    .join('');
  return `<MSG><META>${metaXml}</META>${body}</MSG>`;
}

/** A mailbox that behaves like `inner` except for the overridden methods (fault injection). */
export function mailboxWith(inner: Mailbox, overrides: Partial<Mailbox>): Mailbox {
  const bound = {} as Record<string, unknown>;
  for (const k of [
    'insertInbound',
    'scanUnprocessed',
    'scanIds',
    'readRanges',
    'readTexts',
    'markColumns',
    'markProcessed',
    'filterUnprocessed',
    'insertOutbound',
    'outboundExists',
    'findOutbound',
    'ping',
    'close',
  ] as const)
    bound[k] = (inner[k] as (...a: unknown[]) => unknown).bind(inner);
  return { ...(bound as unknown as Mailbox), kind: inner.kind, ...overrides };
}
