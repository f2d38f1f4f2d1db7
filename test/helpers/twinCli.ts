import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..', '..');
const run = promisify(execFile);

/** The CLI (`bin/msgx.mjs <args>`) as an operator runs it against the twin at `base`; resolves with its stdout. */
export async function twinCli(base: string, ...args: string[]): Promise<string> {
  const env = { ...process.env, MSGX_PG_URL: '', MSGX_TWIN_URL: base };
  return (await run(process.execPath, [join(ROOT, 'bin/msgx.mjs'), ...args], { env, cwd: ROOT })).stdout;
}
