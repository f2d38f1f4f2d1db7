import { describe, expect, it } from 'vitest';
import { CredentialsRefusedError, retryOnAuthFailure } from '../../lib/config/credentials.ts';
import { urlFromSecret, urlSources } from '../../lib/config/secrets.ts';
import { isPgAuthError } from '../../lib/db/pg.ts';
import { isMysqlAuthError, mysqlPoolConfig } from '../../lib/mailbox/mysqlPool.ts';

describe('connection settings built from secrets and config', () => {
  it('PostgreSQL: verify-full always, the CA file as sslrootcert, credentials URL-encoded', () => {
    const u = new URL(
      urlFromSecret('postgres', { username: 'msgx_app', password: 'p@ss/w:rd%', port: 5432 }, 'db.internal', 'msgx', {
        caFile: '/var/runtime/ca-cert.pem',
      }),
    );
    expect(u.searchParams.get('sslmode')).toBe('verify-full');
    expect(u.searchParams.get('sslrootcert')).toBe('/var/runtime/ca-cert.pem');
    expect(decodeURIComponent(u.password)).toBe('p@ss/w:rd%');
    expect([u.hostname, u.port, u.pathname]).toEqual(['db.internal', '5432', '/msgx']);
    // Without a CA file the runtime's trust store (NODE_EXTRA_CA_CERTS) verifies; still verify-full.
    const plain = new URL(urlFromSecret('postgres', { username: 'a', password: 'b' }, 'h'));
    expect(plain.searchParams.get('sslmode')).toBe('verify-full');
    expect(plain.searchParams.has('sslrootcert')).toBe(false);
  });

  it('takes the port from the environment when the secret has none, and names a bad secret', async () => {
    const env = { MSGX_PG_SECRET_ARN: 'arn:pg', MSGX_PG_HOST: 'h', MSGX_PG_PORT: '6543', MSGX_MAILBOX_SECRET_ARN: 'arn:mb' };
    const s = urlSources(env, async (arn) => (arn === 'arn:pg' ? '{"username":"u","password":"p"}' : '{"user":"x"}'));
    expect(new URL(await s.pg!()).port).toBe('6543');
    await expect(s.mailbox!()).rejects.toThrow(/secret arn:mb needs string fields username and password/);
  });

  it('MySQL: TLS only with a CA, verifying the certificate (and host name)', () => {
    expect(mysqlPoolConfig('mysql://u@h/db', {}).ssl).toBeUndefined();
    expect(mysqlPoolConfig('mysql://u@h/db', { ssl: { ca: 'PEM' } }).ssl).toEqual({
      ca: 'PEM',
      rejectUnauthorized: true,
      verifyIdentity: true,
    });
    // An IP address cannot be checked against the certificate by mysql2: refused, by name.
    expect(() => mysqlPoolConfig('mysql://u@10.0.0.7/db', { ssl: { ca: 'PEM' } })).toThrow(/10\.0\.0\.7 is an IP address/);
    expect(() => mysqlPoolConfig('mysql://u@[::1]/db', { ssl: { ca: 'PEM' } })).toThrow(/::1 is an IP address/);
    expect(mysqlPoolConfig('mysql://u@10.0.0.7/db', {}).ssl).toBeUndefined();
  });

  it('recognises refused logins by SQLSTATE / MySQL error, nothing else', () => {
    expect([isPgAuthError({ code: '28P01' }), isPgAuthError({ code: '28000' }), isPgAuthError({ code: '57P01' })]).toEqual([
      true,
      true,
      false,
    ]);
    expect([
      isMysqlAuthError({ code: 'ER_ACCESS_DENIED_ERROR' }),
      isMysqlAuthError({ errno: 1045 }),
      isMysqlAuthError({ code: 'ECONNRESET' }),
    ]).toEqual([true, true, false]);
  });
});

describe('retryOnAuthFailure', () => {
  const refused = Object.assign(new Error('password authentication failed'), { code: '28P01' });

  it('re-reads and retries after each backoff until the login works', async () => {
    const slept: number[] = [];
    let refreshes = 0;
    let calls = 0;
    const r = await retryOnAuthFailure(
      async () => {
        calls++;
        if (refreshes < 3) throw refused;
        return 'ok';
      },
      {
        isAuthError: isPgAuthError,
        refresh: async () => void refreshes++,
        delaysMs: [0, 100, 200, 400],
        sleep: async (ms) => void slept.push(ms),
      },
    );
    expect({ r, calls, refreshes, slept }).toEqual({ r: 'ok', calls: 4, refreshes: 3, slept: [100, 200] });
  });

  it('does not retry other errors, and gives up with a typed error', async () => {
    const other = Object.assign(new Error('boom'), { code: '42P01' });
    let refreshes = 0;
    const opts = { isAuthError: isPgAuthError, refresh: async () => void refreshes++, delaysMs: [0, 0], sleep: async () => {} };
    await expect(retryOnAuthFailure(async () => Promise.reject(other), opts)).rejects.toBe(other);
    expect(refreshes).toBe(0);
    await expect(retryOnAuthFailure(async () => Promise.reject(refused), opts)).rejects.toBeInstanceOf(CredentialsRefusedError);
    expect(refreshes).toBe(2);
  });
});
