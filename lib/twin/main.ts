import { EmbeddedStoreError } from '../db/pgliteDir.ts';
import { loadConfig } from '../config/config.ts';
import { buildRouter } from '../http/app.ts';
import { startHttpServer } from '../http/node.ts';
import { createLogger } from '../observability/logger.ts';
import { ConfigError } from '../shared/errors.ts';
import { buildContext, closeContext } from '../app/buildContext.ts';
import { startRoles } from './startRoles.ts';
import { SEND_PATH } from '../constants.ts';
import { pauseAtStart } from '../pipeline/pause.ts';

/**
 * `npm start`: every function in one process, each role looping continuously at its poll
 * interval (woken earlier by NOTIFY), and the HTTP API. Embedded defaults when nothing is set.
 */
async function main(): Promise<void> {
  const log = createLogger('msgx-twin');
  let config;
  try {
    config = loadConfig({ ...process.env, MSGX_RUNTIME: 'twin' });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`msgx: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const ctx = await buildContext(config, { migrate: true, log });
  // Before any role runs, so not one message is applied before an operator resumes.
  if (await pauseAtStart(ctx.db, config.roles.startPaused, 'twin start (MSGX_START_PAUSED)', ctx.clock.now()))
    log.warn('pipeline paused at start (MSGX_START_PAUSED=1): nothing is applied until `npx msgx resume`');
  const stop = new AbortController();
  // Kafka is reached here. No role runs yet if that fails: close the database (its lock too) before saying why.
  const roles = await startRoles(ctx, stop.signal).catch(async (err: unknown) => {
    await closeContext(ctx);
    throw err;
  });
  let server;
  try {
    server = await startHttpServer(ctx, buildRouter(roles.healthChecks), { port: config.http.port, host: config.http.host });
  } catch (err) {
    // The roles already run: stop them and close the database (its lock too) before saying why.
    stop.abort();
    await roles.done;
    await roles.close();
    await closeContext(ctx);
    throw listenError(err, config.http.host, config.http.port);
  }
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.http.port;
  const base = `http://${config.http.host === '0.0.0.0' ? '127.0.0.1' : config.http.host}:${port}`;
  log.info('msgx twin running', {
    api: `${base}${SEND_PATH}`,
    health: `${base}/health`,
    console: `${base}/console`,
    database: config.pgUrl ? 'postgresql' : `embedded PGlite (${config.dataDir}/pg)`,
    mailbox: config.mailboxUrl ? 'mysql' : 'tables in the msgx database',
    kafka: config.kafka.brokers.length ? config.kafka.brokers.join(',') : `file sink (${config.dataDir}/events)`,
  });

  const shutdown = async (signal: string) => {
    if (stop.signal.aborted) return;
    log.info('shutting down', { signal });
    stop.abort();
    server.close();
    // Workers finish or roll back their current transaction and release their locks.
    await roles.done;
    await roles.close();
    await closeContext(ctx);
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

/** A port that is taken or not ours to open is the user's to fix: one line naming the setting. */
function listenError(err: unknown, host: string, port: number): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  const why =
    code === 'EADDRINUSE'
      ? 'another program is using it'
      : code === 'EACCES'
        ? 'this user may not open it'
        : code === 'EADDRNOTAVAIL'
          ? 'no interface of this machine has that address'
          : undefined;
  if (!why) return err;
  const fix = code === 'EADDRNOTAVAIL' ? 'set MSGX_HTTP_HOST to an address of this machine' : 'set MSGX_HTTP_PORT to a free port';
  return new ConfigError(`cannot listen on ${host}:${port}: ${why} (${code}); ${fix}`);
}

main().catch((err) => {
  // A reason the user can act on: one line, no stack.
  if (err instanceof EmbeddedStoreError || err instanceof ConfigError) {
    process.stderr.write(`msgx: ${err.message}\n`);
    // The driver's own error, for whoever debugs the start (MSGX_LOG_LEVEL=DEBUG).
    if (process.env.MSGX_LOG_LEVEL === 'DEBUG' && err.cause instanceof Error) process.stderr.write(`${err.cause.stack}\n`);
    process.exit(1);
  }
  process.stderr.write(`msgx: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
