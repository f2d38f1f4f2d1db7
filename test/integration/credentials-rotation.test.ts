import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CredentialsRefusedError } from '../../lib/config/credentials.ts';
import { urlFromSecret, urlSources } from '../../lib/config/secrets.ts';
import { ensureAppUser } from '../../lib/db/appUser.ts';
import { migrate } from '../../lib/db/migrate.ts';
import { PgDb } from '../../lib/db/pg.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { MysqlMailbox } from '../../lib/mailbox/mysql.ts';
import type { MailboxText } from '../../lib/mailbox/mailbox.ts';
import { startPrivatePg, type PrivatePg } from '../helpers/privatePg.ts';
import { freshMysql, serviceUrls, type TestMysql, waitFor } from '../helpers/services.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:msgx/pg-Stand1';

/**
 * The "secret stand-in": what Secrets Manager's GetSecretValue would return, changed by the test
 * the way a rotation changes AWSCURRENT. Counts its reads.
 */
function standIn(initial: Record<string, unknown>) {
  let current = initial;
  const s = {
    reads: 0,
    read: async (arn: string) => {
      if (arn !== ARN) throw new Error(`unexpected secret ${arn}`);
      s.reads++;
      return JSON.stringify(current);
    },
    set(next: Record<string, unknown>) {
      current = next;
    },
  };
  return s;
}

const password = () => randomBytes(12).toString('base64url');

describe('credentials survive a rotation, over verify-full TLS (private PostgreSQL with password checks)', () => {
  let srv: PrivatePg;
  let admin: pg.Client;
  const user = `msgx_rot_${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    srv = await startPrivatePg();
    admin = new pg.Client({ connectionString: srv.superUrl });
    await admin.connect();
  }, 120_000);
  afterAll(async () => {
    await admin?.end().catch(() => {});
    await srv?.stop();
  });

  /**
   * Ends the user's sessions, as idle timeouts and frozen Lambdas do: the pool must log in again.
   * Waits (polling) until the pool has noticed and dropped its idle clients.
   */
  const dropSessions = async (name: string, db: PgDb) => {
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [name]);
    await waitFor(() => db.pool.idleCount === 0, { what: 'the pool to drop its terminated clients' });
  };

  it('a warm pool, its role-lock sessions and LISTEN follow a new password without a restart', async () => {
    const first = password();
    await admin.query(`CREATE ROLE ${user} LOGIN PASSWORD '${first}'`);
    const secret = standIn({ username: user, password: first, port: srv.port, dbname: 'postgres' });
    const env = { MSGX_PG_SECRET_ARN: ARN, MSGX_PG_HOST: srv.host, MSGX_PG_SSL_CA: srv.caFile };
    const sources = urlSources(env, secret.read);
    const db = new PgDb(await sources.pg!(), { max: 2, refreshUrl: sources.pg, authRetryDelaysMs: [0, 0] });
    try {
      expect((await db.query<{ u: string }>('SELECT current_user AS u')).rows).toEqual([{ u: user }]);
      const readsBefore = secret.reads;

      // Rotation: the password changes in the database and in the secret.
      const second = password();
      await admin.query(`ALTER ROLE ${user} PASSWORD '${second}'`);
      secret.set({ username: user, password: second, port: srv.port, dbname: 'postgres' });
      await dropSessions(user, db);

      const r = await db.query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
      expect(r.rows).toEqual([{ ssl: true }]);
      expect(secret.reads).toBe(readsBefore + 1);
      const lock = await tryRoleLock(db, 'rotation-test');
      expect(lock).not.toBeNull();
      await lock!.release();
      let heard = '';
      const stop = await db.listen('msgx_rotation_test', (p) => (heard = p));
      await db.query(`SELECT pg_notify('msgx_rotation_test', 'after-rotation')`);
      for (let i = 0; i < 100 && !heard; i++) await db.query('SELECT 1');
      await stop();
      expect(heard).toBe('after-rotation');
    } finally {
      await db.close();
    }
  });

  it('without the re-read (the old behaviour) the warm pool fails on every new connection', async () => {
    const pw = password();
    await admin.query(`ALTER ROLE ${user} PASSWORD '${pw}'`);
    const url = urlFromSecret('postgres', { username: user, password: pw, port: srv.port }, srv.host, 'postgres', { caFile: srv.caFile });
    const db = new PgDb(url, { max: 1 });
    try {
      await db.query('SELECT 1');
      await admin.query(`ALTER ROLE ${user} PASSWORD '${password()}'`);
      await dropSessions(user, db);
      await expect(db.query('SELECT 1')).rejects.toMatchObject({ code: '28P01' });
    } finally {
      await db.close();
    }
  });

  it('gives up with a typed error naming the cause when the secret never catches up', async () => {
    const secret = standIn({ username: user, password: 'stale', port: srv.port, dbname: 'postgres' });
    const sources = urlSources({ MSGX_PG_SECRET_ARN: ARN, MSGX_PG_HOST: srv.host, MSGX_PG_SSL_CA: srv.caFile }, secret.read);
    const db = new PgDb(await sources.pg!(), { refreshUrl: sources.pg, authRetryDelaysMs: [0, 0, 0] });
    try {
      const err = await db.query('SELECT 1').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CredentialsRefusedError);
      expect(String((err as Error).message)).toMatch(/refused the credentials after 3 re-reads/);
      expect(secret.reads).toBe(1 + 3);
    } finally {
      await db.close();
    }
  });

  it('refuses a server whose certificate does not chain to the configured CA (verify-full)', async () => {
    const url = urlFromSecret('postgres', { username: 'postgres', password: 'private-super', port: srv.port }, srv.host, 'postgres', {
      caFile: srv.otherCaFile,
    });
    expect(new URL(url).searchParams.get('sslmode')).toBe('verify-full');
    const db = new PgDb(url);
    try {
      await expect(db.query('SELECT 1')).rejects.toThrow(/self[- ]signed|unable to verify|certificate/i);
    } finally {
      await db.close();
    }
  });

  it('the migrate step creates the functions user with its secret password and grants it the schema', async () => {
    await admin.query(`CREATE DATABASE msgx_app_test`);
    const adminUrl = srv.superUrl.replace('/postgres?', '/msgx_app_test?');
    const adminDb = new PgDb(adminUrl);
    const appUser = { username: `msgx_app_${randomBytes(3).toString('hex')}`, password: password() };
    try {
      await migrate(adminDb);
      expect(await ensureAppUser(adminDb, appUser)).toEqual({ created: true });
      // Again on the next deploy: the user exists, its (rotated) password is left alone.
      expect(await ensureAppUser(adminDb, { ...appUser, password: 'not-this-one' })).toEqual({ created: false });
      const url = urlFromSecret('postgres', { ...appUser, port: srv.port }, srv.host, 'msgx_app_test', { caFile: srv.caFile });
      const app = new PgDb(url);
      try {
        const r = await app.query<{ n: number }>('SELECT count(*)::int AS n FROM msgx_migrations');
        expect(r.rows[0]!.n).toBeGreaterThan(0);
        await app.tx(async (tx) => {
          await tx.query('INSERT INTO msgx_migrations (id, name) VALUES (999999, $1)', ['grant-check']);
          await tx.query('DELETE FROM msgx_migrations WHERE id = 999999');
        });
      } finally {
        await app.close();
      }
    } finally {
      await adminDb.close();
    }
  });
});

describe('the mailbox connection follows a rotated MySQL password (shared MariaDB)', () => {
  let my: TestMysql;
  let root: mysql.Connection;
  const user = `msgx_rot_${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    my = await freshMysql();
    root = await mysql.createConnection({ uri: serviceUrls().mailboxUrl });
  });
  afterAll(async () => {
    await root?.query(`DROP USER IF EXISTS '${user}'@'%'`).catch(() => {});
    await root?.end();
    await my?.drop();
  });

  it('re-reads the URL after ER_ACCESS_DENIED_ERROR and carries on', async () => {
    const dbName = new URL(my.url).pathname.slice(1);
    const first = password();
    await root.query(`CREATE USER '${user}'@'%' IDENTIFIED BY '${first}'`);
    await root.query(`GRANT ALL ON \`${dbName}\`.* TO '${user}'@'%'`);
    const secret = standIn({ username: user, password: first });
    const { hostname, port } = new URL(serviceUrls().mailboxUrl);
    const env = { MSGX_MAILBOX_SECRET_ARN: ARN, MSGX_MAILBOX_HOST: hostname, MSGX_MAILBOX_PORT: port || '3306', MSGX_MAILBOX_DB: dbName };
    const sources = urlSources(env, async (arn) => secret.read(arn));
    const mailbox = new MysqlMailbox(await sources.mailbox!(), { refreshUrl: sources.mailbox, authRetryDelaysMs: [0] });
    try {
      const id = await mailbox.insertInbound('<MSG>before rotation</MSG>');
      const second = password();
      await root.query(`ALTER USER '${user}'@'%' IDENTIFIED BY '${second}'`);
      secret.set({ username: user, password: second });
      const [procs] = await root.query<mysql.RowDataPacket[]>('SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?', [user]);
      for (const p of procs) await root.query(`KILL ${Number(p.ID)}`).catch(() => {});
      // The pool may first hit a connection the KILL closed; that is not an auth failure.
      let texts: Map<number, MailboxText> | undefined;
      for (let i = 0; i < 5 && !texts; i++) texts = await mailbox.readTexts([id]).catch(() => undefined);
      expect(texts?.get(id)).toBe('<MSG>before rotation</MSG>');
      expect(secret.reads).toBe(2);
    } finally {
      await mailbox.close();
    }
  });

  it('asks for TLS when a CA is configured, and never falls back to plain text', async () => {
    // The shared MariaDB has TLS disabled: a mailbox told to verify must refuse to talk to it.
    // (By name: with TLS an IP address is refused before connecting, see mailbox-tls.test.ts.)
    const url = new URL(my.url);
    url.hostname = 'localhost';
    const mailbox = new MysqlMailbox(url.toString(), { ssl: { ca: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' } });
    try {
      await expect(mailbox.ping()).rejects.toThrow(/does not offer TLS/i);
    } finally {
      await mailbox.close();
    }
  });
});
