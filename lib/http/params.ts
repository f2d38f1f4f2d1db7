import { InvalidFieldError } from './errors.ts';
import type { HttpRequest } from './types.ts';

/**
 * A numeric ID from the path (`/admin/messages/{msgId}`): decimal digits only, a positive safe
 * integer. `Number()` alone would read `0x10` as 16, `1e3` as 1000 and ` 7` as 7, so a typo
 * or a probe would reach another row than the one named.
 */
export function idParam(req: Pick<HttpRequest, 'params'>, name: string): number {
  const raw = req.params[name] ?? '';
  const id = Number(raw);
  if (!/^\d{1,16}$/.test(raw) || !Number.isSafeInteger(id) || id <= 0)
    throw new InvalidFieldError(name, `must be a positive ID in decimal digits (got ${JSON.stringify(raw.slice(0, 40))})`);
  return id;
}
