import { readFileSync } from 'node:fs';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/db.ts';
import { mailboxDdlFile } from './ddl.ts';
import type { Mailbox } from './mailbox.ts';
import { PgMailbox } from './pg.ts';
import { ConfigError } from '../shared/errors.ts';

/** The mailbox of a cloud function without MSGX_MAILBOX_URL: every use is refused, by name. */
function noMailbox(): Mailbox {
  const refuse = async (): Promise<never> => {
    throw new ConfigError(
      'MSGX_MAILBOX_URL: required in the cloud to use the mailbox (it belongs to its owner; this function has none bound)',
    );
  };
  return {
    kind: 'mysql',
    markColumns: refuse,
    insertInbound: refuse,
    scanUnprocessed: refuse,
    scanIds: refuse,
    readRanges: refuse,
    readTexts: refuse,
    markProcessed: refuse,
    filterUnprocessed: refuse,
    insertOutbound: refuse,
    outboundExists: refuse,
    findOutbound: refuse,
    ping: refuse,
    close: async () => {},
  };
}

/**
 * Files of SQL that openMailbox() runs against msgx's own database on every start (the mailbox
 * tables of the twin without MSGX_MAILBOX_URL; none otherwise): a new embedded database gets them
 * where it is created (lib/db/pgliteDir.ts).
 */
export function mailboxDdlFiles(config: Pick<Config, 'mailboxUrl' | 'runtime'>): string[] {
  return !config.mailboxUrl && config.runtime === 'twin' ? [mailboxDdlFile('pg')] : [];
}

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
  // A cloud function bound to no mailbox (dispatcher, migrate) never uses one; msgx's own tables
  // must not stand in for the owner's if it ever did.
  if (!config.mailboxUrl && config.runtime === 'lambda') return noMailbox();
  const ssl = config.mailboxSslCa ? { ca: readFileSync(config.mailboxSslCa), caFile: config.mailboxSslCa } : undefined;
  const mailbox = config.mailboxUrl
    ? new (await import('./mysql.ts')).MysqlMailbox(config.mailboxUrl, { ssl, ...options })
    : new PgMailbox(db);
  if (config.runtime === 'twin') await mailbox.ensureTables();
  return mailbox;
}
