import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/db.ts';
import type { Mailbox } from './mailbox.ts';
import { PgMailbox } from './pg.ts';

/**
 * MySQL when MSGX_MAILBOX_URL is set, else tables in msgx's own database. Only the twin creates
 * missing mailbox tables: in the cloud the mailbox belongs to its owner. mysql2 is loaded only
 * when used (~15 MB resident that the embedded twin does without).
 */
export async function openMailbox(
  config: Pick<Config, 'mailboxUrl' | 'runtime'> & Partial<Pick<Config, 'mailboxSslCa'>>,
  db: Db,
  options: { refreshUrl?: () => Promise<string> } = {},
): Promise<Mailbox> {
  const ssl = config.mailboxSslCa ? { ca: readFileSync(config.mailboxSslCa), caFile: config.mailboxSslCa } : undefined;
  const mailbox = config.mailboxUrl
    ? new (await import('./mysql.ts')).MysqlMailbox(config.mailboxUrl, { ssl, ...options })
    : new PgMailbox(db);
  if (config.runtime === 'twin') await mailbox.ensureTables();
  return mailbox;
}
