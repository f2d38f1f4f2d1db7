import type { AppContext } from '../app/context.ts';
import { missingTopics, type MissingTopic } from './missingTopics.ts';
import type { TargetBacklog } from './queries.ts';

export interface StaleTarget {
  target: string;
  /** How long the oldest open event has waited. */
  ageSeconds: number;
  headEventId: number;
  headAttempts: number;
  /** Why it is not moving: the head's last error, when it has one. */
  reason: string | null;
  /** Held by an outage of the whole destination since this long, or null. */
  stalledSeconds: number | null;
}

export interface DeliveryProblems {
  /** MSGX_STALE_TARGET_AFTER in seconds: a target whose head is older is listed below. */
  staleAfterSeconds: number;
  staleTargets: StaleTarget[];
  /** Topics msgx must write that the cluster lacks; null when Kafka could not be asked. */
  missingTopics: MissingTopic[] | null;
  missingTopicsError?: string;
}

/**
 * What /admin/stats, the console and `msgx status` show about delivery that is not progressing
 *: targets whose head is older than the threshold (whatever the reason), and topics
 * the cluster does not have.
 */
export async function deliveryProblems(ctx: Pick<AppContext, 'config' | 'db'>, backlog: TargetBacklog[]): Promise<DeliveryProblems> {
  const staleAfterSeconds = Math.round(ctx.config.outbox.staleAfterMs / 1000);
  const staleTargets = backlog
    .filter((b) => b.oldestAgeSeconds >= staleAfterSeconds)
    .map((b) => ({
      target: b.target,
      ageSeconds: b.oldestAgeSeconds,
      headEventId: b.headEventId,
      headAttempts: b.headAttempts,
      reason: b.headLastError,
      stalledSeconds: b.stalledSeconds,
    }));
  try {
    return { staleAfterSeconds, staleTargets, missingTopics: await missingTopics(ctx.config, ctx.db) };
  } catch (err) {
    return { staleAfterSeconds, staleTargets, missingTopics: null, missingTopicsError: err instanceof Error ? err.message : String(err) };
  }
}
