import { backoffMs as exponentialBackoff } from '../shared/backoff.ts';
import type { DeliverySettings } from '../config/delivery.ts';

// The settings themselves are parsed with the config (lib/config/delivery.ts); the outbox reads them here.
export { deliverySettingsFor, type DeliverySettings } from '../config/delivery.ts';

/** Exponential backoff: the wait after the n-th failed attempt (n ≥ 1), doubling to the cap. */
export function backoffMs(s: Pick<DeliverySettings, 'initialBackoffMs' | 'maxBackoffMs'>, attempts: number): number {
  return exponentialBackoff(attempts, s.initialBackoffMs, s.maxBackoffMs);
}
