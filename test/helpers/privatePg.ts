import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './freePort.ts';
import { makeCa, makeServerCert } from './testCa.ts';

/**
 * A PostgreSQL of the test's own, on a free port, for what the shared server cannot show: it
 * trusts every local login (no password is ever checked) and has no TLS. This one checks
 * passwords (scram-sha-256) and serves TLS with a certificate from a CA made for the test, so
 * rotation and verify-full can be tested for real. Only this instance is ever stopped.
 */
export interface PrivatePg {
  host: string;
  port: number;
  /** Superuser URL (password checked), plain TCP is refused: hostssl only. */
  superUrl: string;
  /** PEM of the CA that signed the server certificate (for localhost and 127.0.0.1). */
  caFile: string;
  /** PEM of another CA, which did not sign it. */
  otherCaFile: string;
  stop(): Promise<void>;
}

const SUPER_PASSWORD = 'private-super';

function pgBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const bin = versions.map((v) => join(root, v, 'bin')).find((b) => existsSync(join(b, 'initdb')));
  if (!bin) throw new Error(`no PostgreSQL server binaries under ${root} (initdb, pg_ctl): install postgresql`);
  return bin;
}

function asPostgres(cmd: string, args: string[]): void {
  const r = spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr || r.stdout}`);
}

/** The private server's max_connections: a small RDS instance's worth (the emulated cloud's stage is sized to it). */
export const PRIVATE_PG_MAX_CONNECTIONS = 40;

export async function startPrivatePg(): Promise<PrivatePg> {
  const bin = pgBin();
  const dir = mkdtempSync(join(tmpdir(), 'msgx-privpg-'));
  chmodSync(dir, 0o755);
  makeCa(dir, 'ca');
  makeCa(dir, 'otherca');
  makeServerCert(dir, 'server', 'ca', 'DNS:localhost,IP:127.0.0.1', 'localhost');
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  chownSync(join(dir, 'server.key'), uid, gid);
  chmodSync(join(dir, 'server.key'), 0o600);
  const data = join(dir, 'data');
  writeFileSync(join(dir, 'pw'), SUPER_PASSWORD);
  chownSync(join(dir, 'pw'), uid, gid);
  chownSync(dir, uid, gid);
  asPostgres(join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    'postgres',
    '--pwfile',
    join(dir, 'pw'),
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    '-E',
    'UTF8',
    '--no-sync',
  ]);
  const port = await freePort();
  appendFileSync(
    join(data, 'postgresql.conf'),
    [
      `port = ${port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      `ssl = on`,
      `ssl_cert_file = '${join(dir, 'server.crt')}'`,
      `ssl_key_file = '${join(dir, 'server.key')}'`,
      `fsync = off`,
      `max_connections = ${PRIVATE_PG_MAX_CONNECTIONS}`,
      `shared_buffers = 16MB`,
      '',
    ].join('\n'),
  );
  // TLS only, passwords checked: what RDS with rds.force_ssl=1 looks like to a client.
  writeFileSync(join(data, 'pg_hba.conf'), ['local all all trust', 'hostssl all all 127.0.0.1/32 scram-sha-256', ''].join('\n'));
  asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', 'start']);
  const caFile = join(dir, 'ca.crt');
  return {
    host: '127.0.0.1',
    port,
    superUrl: `postgres://postgres:${SUPER_PASSWORD}@127.0.0.1:${port}/postgres?sslmode=verify-full&sslrootcert=${caFile}`,
    caFile,
    otherCaFile: join(dir, 'otherca.crt'),
    async stop() {
      spawnSync('runuser', ['-u', 'postgres', '--', join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'], { stdio: 'pipe' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
