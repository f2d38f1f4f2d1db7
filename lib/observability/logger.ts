import { Logger } from '@aws-lambda-powertools/logger';

export type Log = Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;

/** Structured JSON logs (Powertools): the same lines in Lambda and in the twin. */
export function createLogger(serviceName = 'msgx', level = process.env.MSGX_LOG_LEVEL ?? 'INFO'): Logger {
  return new Logger({ serviceName, logLevel: level as 'INFO' });
}

/** For tests and tools that want silence. */
export const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };
