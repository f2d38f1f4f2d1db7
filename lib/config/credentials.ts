/**
 * Database credentials that survive a rotation without a cold start. The clients (lib/db/pg.ts,
 * lib/mailbox/mysql.ts) call `retryOnAuthFailure` around every connection attempt: when the
 * server refuses the password, the connection URL is re-read (Secrets Manager in the cloud), the
 * pool rebuilt on it, and the attempt repeated after a backoff. A login is refused before any
 * statement is sent, so a repeat never runs a statement twice.
 */
export interface AuthRetryOptions {
  isAuthError: (err: unknown) => boolean;
  /** Re-reads the credentials and rebuilds the pool; shared by concurrent callers. */
  refresh: () => Promise<void>;
  /**
   * Wait before each re-read. The first is immediate (the usual case: the secret already holds
   * the new password); later ones cover a rotation caught between its steps.
   */
  delaysMs?: number[];
  sleep?: (ms: number) => Promise<void>;
}

export const DEFAULT_AUTH_RETRY_DELAYS_MS = [0, 1000, 2000, 4000];

export class CredentialsRefusedError extends Error {
  constructor(attempts: number, cause: unknown) {
    super(`the database refused the credentials after ${attempts} re-reads of the secret: ${(cause as Error)?.message ?? cause}`, {
      cause,
    });
    this.name = 'CredentialsRefusedError';
  }
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function retryOnAuthFailure<T>(attempt: () => Promise<T>, o: AuthRetryOptions): Promise<T> {
  const delays = o.delaysMs ?? DEFAULT_AUTH_RETRY_DELAYS_MS;
  const sleep = o.sleep ?? realSleep;
  try {
    return await attempt();
  } catch (err) {
    if (!o.isAuthError(err)) throw err;
    let last = err;
    for (const delay of delays) {
      if (delay > 0) await sleep(delay);
      await o.refresh();
      try {
        return await attempt();
      } catch (again) {
        if (!o.isAuthError(again)) throw again;
        last = again;
      }
    }
    throw new CredentialsRefusedError(delays.length, last);
  }
}
