/* Delivery settings (global and per target) are parsed with the config, so they live below it:
 * lib/outbox/settings.ts re-exports them, and config never imports a domain (no cycle). */
import { z } from 'zod';
import { parseDuration } from './parse.ts';
import { ConfigError } from '../shared/errors.ts';

/** The delivery settings of one target (docs/outbox.md "Settings"). */
export interface DeliverySettings {
  batchSize: number;
  publishTimeoutMs: number;
  maxRetryCount: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  retryStrategy: 'exponential_backoff';
}

const durationField = z.union([z.number().int().positive(), z.string()]).transform((v, ctx) => {
  if (typeof v === 'number') return v;
  try {
    const ms = parseDuration(v);
    if (ms <= 0) throw new Error('must be positive');
    return ms;
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: (e as Error).message });
    return z.NEVER;
  }
});

const overrideSchema = z
  .object({
    batchSize: z.number().int().positive().optional(),
    publishTimeout: durationField.optional(),
    maxRetryCount: z.number().int().positive().optional(),
    initialBackoff: durationField.optional(),
    maxBackoff: durationField.optional(),
    retryStrategy: z.enum(['exponential_backoff']).optional(),
  })
  .strict();

export type TargetOverride = Partial<DeliverySettings>;

/**
 * MSGX_DELIVERY_TARGET_OVERRIDES: JSON object from target ('msg', 'schd', 'tx:<topic>') to
 * `{batchSize?, publishTimeout?, maxRetryCount?, initialBackoff?, maxBackoff?, retryStrategy?}`;
 * durations as '5s' or milliseconds. Used as a zod field of the config schema.
 */
export const targetOverridesField = () =>
  z
    .string()
    .optional()
    .transform((text, ctx): Record<string, TargetOverride> => {
      if (!text || !text.trim()) return {};
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: `must be JSON: ${(e as Error).message}` });
        return z.NEVER;
      }
      const parsed = z.record(z.string().min(1), overrideSchema).safeParse(raw);
      if (!parsed.success) {
        for (const i of parsed.error.issues) ctx.addIssue({ code: 'custom', message: `${i.path.join('.') || '(root)'}: ${i.message}` });
        return z.NEVER;
      }
      const out: Record<string, TargetOverride> = {};
      for (const [target, o] of Object.entries(parsed.data)) {
        const s: TargetOverride = {};
        if (o.batchSize !== undefined) s.batchSize = o.batchSize;
        if (o.publishTimeout !== undefined) s.publishTimeoutMs = o.publishTimeout;
        if (o.maxRetryCount !== undefined) s.maxRetryCount = o.maxRetryCount;
        if (o.initialBackoff !== undefined) s.initialBackoffMs = o.initialBackoff;
        if (o.maxBackoff !== undefined) s.maxBackoffMs = o.maxBackoff;
        if (o.retryStrategy !== undefined) s.retryStrategy = o.retryStrategy;
        out[target] = s;
      }
      return out;
    });

/** The part of Config['outbox'] the delivery settings are read from. */
type OutboxConfig = DeliverySettings & { leaseMs: number; targetOverrides?: Record<string, TargetOverride> };

/** The global settings with the target's override applied. */
export function deliverySettingsFor(outbox: OutboxConfig, target: string): DeliverySettings {
  const o = outbox.targetOverrides?.[target] ?? {};
  return {
    batchSize: o.batchSize ?? outbox.batchSize,
    publishTimeoutMs: o.publishTimeoutMs ?? outbox.publishTimeoutMs,
    maxRetryCount: o.maxRetryCount ?? outbox.maxRetryCount,
    initialBackoffMs: o.initialBackoffMs ?? outbox.initialBackoffMs,
    maxBackoffMs: o.maxBackoffMs ?? outbox.maxBackoffMs,
    retryStrategy: o.retryStrategy ?? outbox.retryStrategy,
  };
}

/**
 * Refuses contradictory merged settings at start, naming the setting: an override's initial
 * backoff above the effective max, or a publish timeout that a lease could not cover.
 */
export function checkTargetOverrides(outbox: OutboxConfig): Record<string, TargetOverride> {
  const problems: string[] = [];
  for (const target of Object.keys(outbox.targetOverrides ?? {})) {
    const s = deliverySettingsFor(outbox, target);
    const where = `MSGX_DELIVERY_TARGET_OVERRIDES.${target}`;
    if (s.initialBackoffMs > s.maxBackoffMs)
      problems.push(`${where}.initialBackoff: must not exceed maxBackoff (${s.initialBackoffMs}ms > ${s.maxBackoffMs}ms)`);
    if (s.publishTimeoutMs >= outbox.leaseMs)
      problems.push(`${where}.publishTimeout: must be shorter than MSGX_DELIVERY_LEASE (${outbox.leaseMs}ms)`);
  }
  if (problems.length) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return outbox.targetOverrides ?? {};
}
