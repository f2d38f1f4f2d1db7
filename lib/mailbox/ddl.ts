import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { migrationsDir } from '../db/migrate.ts';

/**
 * The twin's DDL for the mailbox tables on one engine (migrations/mailbox-<engine>/001_mailbox.sql).
 * The cloud never runs it: there the tables are the owner's.
 */
export function mailboxDdl(engine: 'mysql' | 'pg'): string {
  return readFileSync(mailboxDdlFile(engine), 'utf8');
}

export function mailboxDdlFile(engine: 'mysql' | 'pg'): string {
  return join(migrationsDir(`mailbox-${engine}`), '001_mailbox.sql');
}
