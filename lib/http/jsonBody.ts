import { RequestError } from '../shared/errors.ts';
import { InvalidFieldError } from './errors.ts';
import type { HttpRequest } from './types.ts';

/** Deeper than any body msgx defines; a limit keeps recursive code (zod, hashing) off the stack's end. */
export const MAX_JSON_DEPTH = 32;

/** `application/json`, with or without parameters (charset), or any `+json` type. */
export function isJsonType(contentType: string | undefined): boolean {
  const type = mediaType(contentType);
  return type === 'application/json' || /^application\/[\w.+-]+\+json$/.test(type);
}

export const mediaType = (contentType: string | undefined): string => (contentType ?? '').split(';')[0]!.trim().toLowerCase();

/**
 * Parses a JSON body or throws a 4xx that says why: 415 for a body that is not declared JSON
 * (a cross-site form can only send form or text types), 400 for bad JSON, nesting deeper than
 * MAX_JSON_DEPTH, a NUL character (PostgreSQL text and jsonb cannot store U+0000), a lone UTF-16
 * surrogate or a number JSON.parse turned into ±Infinity (checkJsonValues, naming the field).
 */
export function parseJsonBody(req: Pick<HttpRequest, 'body' | 'headers'>): unknown {
  const declared = req.headers['content-type'];
  if (declared !== undefined && !isJsonType(declared))
    throw new RequestError(
      415,
      'unsupported_media_type',
      `content type ${mediaType(declared) || '(empty)'} is not accepted; send application/json`,
    );
  if (!req.body) throw new RequestError(400, 'invalid_request', 'a JSON body is required');
  if (declared === undefined) throw new RequestError(415, 'unsupported_media_type', 'content-type is missing; send application/json');
  checkJsonText(req.body);
  let value: unknown;
  try {
    value = JSON.parse(req.body);
  } catch (err) {
    throw new RequestError(400, 'invalid_request', `body is not valid JSON: ${(err as Error).message}`);
  }
  checkJsonValues(value);
  return value;
}

/** parseJsonBody for routes whose body is an object: `null`, arrays and scalars are a 400. */
export function parseJsonObject(req: Pick<HttpRequest, 'body' | 'headers'>): Record<string, unknown> {
  const v = parseJsonBody(req);
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new RequestError(400, 'invalid_request', 'body: must be a JSON object');
  return v as Record<string, unknown>;
}

/** One linear pass, no recursion: nesting depth and `\u0000` escapes (a raw NUL is invalid JSON anyway). */
export function checkJsonText(text: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) {
        if (text[i + 1] === 'u' && /^[0]{4}$/.test(text.slice(i + 2, i + 6)))
          throw new RequestError(400, 'invalid_request', 'body: a string holds a NUL character (\\u0000), which msgx cannot store');
        i++;
      } else if (c === 0x22 /* " */) inString = false;
      else if (c === 0)
        throw new RequestError(400, 'invalid_request', 'body: a string holds a NUL character (\\u0000), which msgx cannot store');
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH)
        throw new RequestError(400, 'invalid_request', `body: JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
}

/**
 * What JSON.parse lets through but msgx cannot keep as sent, refused with the field's path:
 * - a lone UTF-16 surrogate (`"\ud800"`): UTF-8 has no encoding for it, so the driver would store
 *   U+FFFD and PostgreSQL's jsonb refuses its escape outright;
 * - a number out of double range (`1e999`): JSON.parse makes it Infinity, which JSON.stringify
 *   then writes as `null`.
 * Keys are checked like values. Iterative (the depth is bounded by checkJsonText anyway) and
 * linear in the size of the value.
 */
export function checkJsonValues(root: unknown): void {
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value: root, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === 'string') {
      if (hasLoneSurrogate(value)) throw new InvalidFieldError(fieldPath(path), LONE_SURROGATE);
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value))
        throw new InvalidFieldError(fieldPath(path), 'the number is out of range (a JSON number must fit a double)');
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], path: [...path, i] });
    } else if (value !== null && typeof value === 'object') {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, v] = entries[i]!;
        if (hasLoneSurrogate(k)) throw new InvalidFieldError(fieldPath([...path, k]), `the name ${LONE_SURROGATE}`);
        stack.push({ value: v, path: [...path, k] });
      }
    }
  }
}

/** In a `u` pattern a surrogate pair is one code point, so this matches only a lone half (one linear scan). */
export const hasLoneSurrogate = (s: string): boolean => /\p{Surrogate}/u.test(s);

const LONE_SURROGATE = 'holds a lone UTF-16 surrogate (a \\uD800–\\uDFFF escape without its pair), which is not a character';

/** `headers.x-trace`, `ids[3]`, `payload["a b"]`: the path of a field in a body, for error messages. */
export function fieldPath(path: readonly (string | number)[]): string {
  if (path.length === 0) return 'body';
  let out = '';
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(p)) out += out ? `.${p}` : p;
    else out += `[${JSON.stringify(p).slice(0, 120)}]`;
  }
  return out;
}
