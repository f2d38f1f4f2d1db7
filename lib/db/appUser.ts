import type { Db } from './db.ts';

/**
 * The functions connect as their own user (msgx_app), not as the database admin, so that the
 * alternating-users rotation can clone it (msgx_app_clone inherits msgx_app's rights) and switch
 * the secret only once the clone works. The migrate function, connected as the admin, creates the
 * user on the first deploy with the password of its secret and grants it the schema on every
 * deploy (new tables included). Never touches an existing user's password: rotation owns it.
 */
export async function ensureAppUser(db: Db, user: { username: string; password: string }): Promise<{ created: boolean }> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(user.username))
    throw new Error(`app user name ${JSON.stringify(user.username)} is not a plain identifier`);
  const role = `"${user.username}"`;
  return db.tx(async (tx) => {
    const exists = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_roles WHERE rolname = $1`, [user.username]);
    const created = exists.rows[0]!.n === 0;
    if (created) {
      // CREATE ROLE takes no bind parameters: the password goes in as a quoted literal.
      const { rows } = await tx.query<{ q: string }>(`SELECT quote_literal($1) AS q`, [user.password]);
      await tx.query(`CREATE ROLE ${role} LOGIN PASSWORD ${rows[0]!.q}`);
    }
    await tx.query(`GRANT CONNECT, TEMPORARY ON DATABASE "${await currentDatabase(tx)}" TO ${role}`);
    await tx.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
    await tx.query(`GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA public TO ${role}`);
    await tx.query(`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
    await tx.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO ${role}`);
    return { created };
  });
}

async function currentDatabase(tx: { query: Db['query'] }): Promise<string> {
  const r = await tx.query<{ d: string }>(`SELECT current_database() AS d`);
  const name = r.rows[0]!.d;
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new Error(`database name ${name} is not a plain identifier`);
  return name;
}
