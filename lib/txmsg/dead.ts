import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { AppContext } from '../app/context.ts';
import { METRIC_NAMESPACE, METRIC_SERVICE, METRICS } from '../constants.ts';
import type { Queryable } from '../db/db.ts';
import { claimUnreportedDead, listDead, type DeadFilter, type UnreportedDead } from './store.ts';
import { toView, type TxMessageView } from './view.ts';

export type { DeadFilter } from './store.ts';

/** The txmsg part of `GET /admin/dead?kind=txmsg`: DEAD messages with why and where they died. */
export async function deadTxMessages(
  db: Queryable,
  filter: DeadFilter = {},
): Promise<(TxMessageView & { deadPhase: 'check' | 'delivery' | null })[]> {
  const rows = await listDead(db, filter);
  return rows.map((r) => ({ ...toView(r), deadPhase: r.dead_phase }));
}

const REPORT_BATCH = 100;

/**
 * The dead-letter monitor: every transactional message that died — unacknowledged after its last
 * delivery, given up by the relay, or unconfirmed after its check-backs — gets one log line naming
 * it (`txmsg dead letter`, level ERROR: an operator must resend or drop it) and, where metrics are
 * read (Lambda), one `TxMessageDead` datapoint carrying its id. Reported after the death committed,
 * whichever path killed it; a message resent and dead again is reported again.
 */
export async function reportDeadLetters(
  ctx: Pick<AppContext, 'db' | 'clock' | 'log'>,
  emit?: (d: UnreportedDead) => void,
): Promise<number> {
  const dead = await claimUnreportedDead(ctx.db, ctx.clock.now(), REPORT_BATCH);
  for (const d of dead) {
    ctx.log.error('txmsg dead letter', {
      id: d.id,
      topic: d.topic,
      phase: d.dead_phase,
      reason: d.dead_reason,
      deliveries: d.attempts,
      checks: d.checks,
      bizName: d.biz_name,
      diedAt: d.updated_at.toISOString(),
      resend: `POST /admin/tx-messages/${d.id}/resend`,
    });
    emit?.(d);
  }
  return dead.length;
}

/** One EMF datapoint per dead message: dimension service=msgx, the message named in its metadata. */
export function emitDeadLetter(d: UnreportedDead): void {
  const m = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: METRIC_SERVICE });
  m.addMetric(METRICS.txDeadLetter, MetricUnit.Count, 1);
  m.addMetadata('txmsgId', d.id);
  m.addMetadata('topic', d.topic);
  m.addMetadata('phase', d.dead_phase ?? '');
  m.publishStoredMetrics();
}
