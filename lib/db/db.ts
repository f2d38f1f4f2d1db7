import type { ListenOptions, LocalWake } from './localWake.ts';

/**
 * The one database port: PostgreSQL through `pg`, or embedded PGlite in the twin. Same SQL for both.
 * Every query is parameterised ($1, $2 …); nothing is built from input.
 */
export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<T>>;
}

/** A dedicated session: advisory locks and LISTEN live on it and die with it. */
export interface Session extends Queryable {
  /** The connection closed or failed (no round trip: its socket said so). */
  lost(): boolean;
  release(): Promise<void>;
}

export interface Db extends Queryable {
  readonly kind: 'pg' | 'pglite';
  /** Runs `fn` in one transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Calls `onNotify` for each NOTIFY on `channel` until the returned function is called. */
  listen(channel: string, onNotify: (payload: string) => void, options?: ListenOptions): Promise<() => Promise<void>>;
  /**
   * A wake-up of this process's own listeners on `channel` without waiting for the server: send
   * `payload` with the NOTIFY and call `now()` once the notifying transaction committed; that
   * NOTIFY is then not delivered here a second time (lib/db/localWake.ts). A `payload` of one's
   * own must be unique to this wake.
   */
  localWake(channel: string, payload?: string): LocalWake;
  /** A connection of its own (for the advisory lock of a role). PGlite returns its only session. */
  session(): Promise<Session>;
  close(): Promise<void>;
}
