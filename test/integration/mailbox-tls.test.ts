import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { resolveSecretEnv, urlSources } from '../../lib/config/secrets.ts';
import type { Db } from '../../lib/db/db.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { MailboxTlsError, mysqlPoolConfig } from '../../lib/mailbox/mysqlPool.ts';
import { openMailbox } from '../../lib/mailbox/open.ts';
import { type MariadbInstance, mariadbStart, mariadbStop, mariadbUrl } from '../faults/privateServices.ts';
import { freePort } from '../helpers/freePort.ts';
import { makeCa, makeServerCert } from '../helpers/testCa.ts';

/**
 * The mailbox connection the cloud makes, over real TLS: a private MariaDB (never the shared one
 * on 3306, which has TLS off) serves a certificate from a CA made here, and msgx connects the way
 * a Lambda function does — URL assembled from the secret, MSGX_MAILBOX_SSL_CA naming the CA bundle
 * (docs/deploy.md "TLS"), `openMailbox` reading it. The mailbox user REQUIREs SSL, so a session
 * that worked was encrypted; the session status shows the cipher.
 */
const ARN = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:cmin/mailbox-Stand1';
const USER = 'msgx_tls';
const PASSWORD = 'tls-Secret-1';
const DB_NAME = 'mailbox';

/** Not used by the MySQL mailbox: openMailbox only needs a Db for the PostgreSQL mailbox. */
const noDb = {} as Db;

describe('mailbox TLS to MySQL with the CA bundle (private MariaDB serving TLS)', () => {
  let dir: string;
  let m: MariadbInstance;
  let root: mysql.Connection;
  const opened: Mailbox[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'msgx-mytls-'));
    makeCa(dir, 'ca');
    makeCa(dir, 'otherca');
    makeServerCert(dir, 'server', 'ca', 'DNS:localhost,IP:127.0.0.1');
    // Signed by the right CA, but for another host: what a DNS mix-up or a wrong endpoint shows.
    makeServerCert(dir, 'elsewhere', 'ca', 'DNS:mailbox.elsewhere.test');
    copyFileSync(join(dir, 'server.crt'), join(dir, 'serving.crt'));
    copyFileSync(join(dir, 'server.key'), join(dir, 'serving.key'));
    m = {
      dir: join(dir, 'mariadb'),
      port: await freePort(),
      args: [`--ssl-ca=${join(dir, 'ca.crt')}`, `--ssl-cert=${join(dir, 'serving.crt')}`, `--ssl-key=${join(dir, 'serving.key')}`],
    };
    await mariadbStart(m);
    root = await mysql.createConnection({ uri: mariadbUrl(m) });
    await root.query(`CREATE DATABASE ${DB_NAME}`);
    await root.query(`CREATE USER '${USER}'@'%' IDENTIFIED BY '${PASSWORD}' REQUIRE SSL`);
    await root.query(`GRANT ALL ON ${DB_NAME}.* TO '${USER}'@'%'`);
    // The owner's tables (the twin's DDL; in the cloud they exist already).
    const owner = await openMailbox({ mailboxUrl: mariadbUrl(m, DB_NAME), runtime: 'twin' }, noDb);
    await owner.close();
  }, 180_000);

  afterAll(async () => {
    for (const mb of opened) await mb.close().catch(() => {});
    await root?.end().catch(() => {});
    if (m) await mariadbStop(m, true).catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** What a Lambda function does at cold start: secret → URL, MSGX_MAILBOX_SSL_CA → openMailbox. */
  async function cloudMailbox(o: { host?: string; caFile: string }): Promise<{ mailbox: Mailbox; url: string }> {
    const env = {
      MSGX_MAILBOX_SECRET_ARN: ARN,
      MSGX_MAILBOX_HOST: o.host ?? 'localhost',
      MSGX_MAILBOX_PORT: String(m.port),
      MSGX_MAILBOX_DB: DB_NAME,
      MSGX_MAILBOX_SSL_CA: o.caFile,
    };
    const read = async (arn: string) => {
      expect(arn).toBe(ARN);
      return JSON.stringify({ username: USER, password: PASSWORD });
    };
    // The cloud requires PostgreSQL and Kafka settings too; this test opens only the mailbox.
    const others = { MSGX_PG_URL: 'postgres://unused@127.0.0.1:9/unused', MSGX_KAFKA_BROKERS: '127.0.0.1:9' };
    const config = loadConfig({ ...(await resolveSecretEnv(env, read)), ...others, MSGX_RUNTIME: 'lambda' });
    expect(config.mailboxSslCa).toBe(o.caFile);
    const mailbox = await openMailbox(config, noDb, { refreshUrl: urlSources(env, read).mailbox });
    opened.push(mailbox);
    return { mailbox, url: config.mailboxUrl! };
  }

  it('connects with TLS, verified against MSGX_MAILBOX_SSL_CA and the host name, and works', async () => {
    const { mailbox, url } = await cloudMailbox({ caFile: join(dir, 'ca.crt') });
    // The user REQUIREs SSL: these statements ran on encrypted sessions.
    const id = await mailbox.insertInbound('<MSG>over TLS</MSG>');
    expect((await mailbox.readTexts([id])).get(id)).toBe('<MSG>over TLS</MSG>');

    // The same pool options on one session of our own, to read its TLS status.
    const options = mysqlPoolConfig(url, { ssl: { ca: readFileSync(join(dir, 'ca.crt')) } });
    expect(options.ssl).toMatchObject({ rejectUnauthorized: true, verifyIdentity: true });
    const c = await mysql.createConnection(options as mysql.ConnectionOptions);
    try {
      const [rows] = await c.query<mysql.RowDataPacket[]>(`SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_cipher', 'Ssl_version')`);
      const status = Object.fromEntries(rows.map((r) => [r.Variable_name as string, r.Value as string]));
      expect(status.Ssl_cipher).toMatch(/\w/);
      expect(status.Ssl_version).toMatch(/^TLSv1\.[23]$/);
    } finally {
      await c.end();
    }
  });

  it('refuses a server whose certificate is not signed by the given CA, with a clear error', async () => {
    const { mailbox } = await cloudMailbox({ caFile: join(dir, 'otherca.crt') });
    const err = (await mailbox.ping().catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(MailboxTlsError);
    expect(err.message).toContain(`refused localhost:${m.port}: its certificate cannot be verified against the CA bundle`);
    expect(err.message).toContain(join(dir, 'otherca.crt'));
    expect(err.message).toMatch(/self[- ]signed certificate/); // Node's own reason, kept
  });

  it('refuses a certificate from the right CA issued for another host name', async () => {
    // Serve the other certificate (FLUSH SSL reloads the files), then put the right one back.
    copyFileSync(join(dir, 'elsewhere.crt'), join(dir, 'serving.crt'));
    copyFileSync(join(dir, 'elsewhere.key'), join(dir, 'serving.key'));
    await root.query('FLUSH SSL');
    try {
      const { mailbox } = await cloudMailbox({ caFile: join(dir, 'ca.crt') });
      const err = (await mailbox.ping().catch((e: unknown) => e)) as Error;
      expect(err).toBeInstanceOf(MailboxTlsError);
      expect(err.message).toContain(`refused localhost:${m.port}: its certificate is not issued for the host name localhost`);
      expect(err.message).toMatch(/not in the cert's altnames: DNS:mailbox\.elsewhere\.test/);
    } finally {
      copyFileSync(join(dir, 'server.crt'), join(dir, 'serving.crt'));
      copyFileSync(join(dir, 'server.key'), join(dir, 'serving.key'));
      await root.query('FLUSH SSL');
    }
    // The right certificate again: the same settings connect.
    const { mailbox } = await cloudMailbox({ caFile: join(dir, 'ca.crt') });
    await mailbox.ping();
  });

  it('refuses an IP address as the host: the driver could not check the certificate against it', async () => {
    // mysql2 sends no server name for an IP, and Node would then check the name "localhost".
    const err = (await cloudMailbox({ host: '127.0.0.1', caFile: join(dir, 'ca.crt') }).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(MailboxTlsError);
    expect(err.message).toMatch(/127\.0\.0\.1 is an IP address.*set MSGX_MAILBOX_HOST to the server's DNS name/);
  });
});
