/**
 * The short-lived child that creates the embedded database (lib/db/pgliteDir.ts ensureDataDir):
 * `node --import tsx pgliteCreate.ts <dir> [<migrations folder> [<sql file>…]]`. PGlite runs
 * initdb in `<dir>`, then the migrations of the folder apply as on any start, each printed on
 * stdout as one JSON line ({"name","index","total"}), then the SQL files run. Exit 0 once the
 * database is closed; else the reason as the last line of stderr. The parent moves `<dir>` into
 * place; whatever memory this took goes with the process.
 */
import { readFileSync } from 'node:fs';
import { migrate } from './migrate.ts';
import { PgliteDb } from './pglite.ts';

const [dir, migrations, ...then] = process.argv.slice(2);
try {
  if (!dir) throw new Error('usage: pgliteCreate.ts <dir> [<migrations folder> [<sql file>…]]');
  const db = await PgliteDb.create(dir);
  try {
    if (migrations)
      await (async () => {
        await migrate(db, {
          dir: migrations,
          onProgress: (name, index, total) => process.stdout.write(`${JSON.stringify({ name, index, total })}\n`),
        });
        for (const file of then) await db.query(readFileSync(file, 'utf8'));
      })().catch(() => {
        // Left to the twin: it does the rest itself and reports this failure as on any start.
      });
  } finally {
    await db.close();
  }
} catch (err) {
  process.stderr.write(`${(err instanceof Error ? err.message : String(err)).split('\n')[0]}\n`);
  process.exitCode = 1;
}
