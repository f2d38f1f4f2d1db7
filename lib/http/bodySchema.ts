import type { z } from 'zod';
import { InvalidFieldError } from './errors.ts';
import { fieldPath, parseJsonObject } from './jsonBody.ts';
import type { HttpRequest } from './types.ts';

/**
 * The first zod issue as a 400 naming the field. An unknown field (a `.strict()` object) is named
 * as such, so a typo (`dryrun`) is refused instead of silently meaning the default.
 */
export function fieldError(error: z.ZodError): InvalidFieldError {
  const issue = error.issues[0]!;
  const path = issue.path.map((p) => (typeof p === 'number' ? p : String(p)));
  if (issue.code === 'unrecognized_keys') return new InvalidFieldError(fieldPath([...path, issue.keys[0]!]), 'unknown field');
  return new InvalidFieldError(fieldPath(path), issue.message);
}

/**
 * A JSON object body checked by `schema` (which should be `.strict()`). `emptyOk`: a request
 * with no body at all is read as `{}` (actions such as pause take no arguments).
 */
export function parseJsonWith<S extends z.ZodTypeAny>(
  req: Pick<HttpRequest, 'body' | 'headers'>,
  schema: S,
  o: { emptyOk?: boolean } = {},
): z.infer<S> {
  return parseFields(schema, o.emptyOk && req.body === '' ? {} : parseJsonObject(req));
}

/** `value` checked by `schema`; the first problem is a 400 naming the field. */
export function parseFields<S extends z.ZodTypeAny>(schema: S, value: unknown): z.infer<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw fieldError(r.error);
  return r.data;
}
