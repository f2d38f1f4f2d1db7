/**
 * A value built on first use, then kept. For module-level work only some requests need (zod
 * schemas of routes a Lambda cold start may never serve): built at module load, it would be paid
 * by every cold start.
 */
export function lazy<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}
