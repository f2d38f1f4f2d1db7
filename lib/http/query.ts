import { z } from 'zod';
import { RequestError } from '../shared/errors.ts';
import type { HttpRequest } from './types.ts';

/**
 * Validates query parameters with a zod schema; the first problem is a 400 naming the parameter.
 * Unknown parameters are ignored (caches and tools add their own).
 */
export function parseQuery<S extends z.ZodTypeAny>(req: Pick<HttpRequest, 'query'>, schema: S): z.infer<S> {
  const r = schema.safeParse(req.query);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw new RequestError(400, 'invalid_request', `${issue.path.map(String).join('.') || 'query'}: ${issue.message}`);
}

/** An optional integer query parameter in [min, max]. */
export const intParam = (min: number, max: number, fallback: number) =>
  z
    .string()
    .regex(/^-?\d+$/, 'must be an integer')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .default(fallback);
