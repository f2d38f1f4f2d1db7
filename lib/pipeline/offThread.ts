import { Worker } from 'node:worker_threads';
import type { DecodedMessage } from '../codec/message.ts';
import { MalformedError } from '../shared/errors.ts';
import type { Learned } from './decodeCache.ts';

export interface OffThreadAsk {
  id: number;
  text: string;
  timezone: string;
  maxBytes: number;
  dayBoundary: boolean;
}
export interface OffThreadAnswer {
  id: number;
  decoded?: DecodedMessage;
  malformed?: string;
}

/**
 * Texts at least this long are decoded on a worker thread in the twin: a megabyte message is a
 * decode of 100 ms or more that cannot be cut, and the twin's HTTP API shares the pump's thread.
 * (A Lambda serves no HTTP beside its pump, so it decodes in place.)
 */
export const OFF_THREAD_CHARS = 128 * 1024;

let worker: Worker | null = null;
let next = 0;
const waiting = new Map<number, (a: OffThreadAnswer | null) => void>();

function start(): Worker {
  const url = new URL('./decodeWorker.ts', import.meta.url).href;
  // A worker does not inherit the twin's TypeScript loader: it registers it before loading the file.
  // Resolved here: the worker's own bare specifiers resolve from the working directory, which need
  // not be this checkout.
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(url)}); })`;
  const w = new Worker(boot, { eval: true });
  w.unref();
  w.on('message', (a: OffThreadAnswer) => {
    const done = waiting.get(a.id);
    waiting.delete(a.id);
    done?.(a);
  });
  const lost = () => {
    if (worker === w) worker = null;
    for (const done of waiting.values()) done(null);
    waiting.clear();
  };
  w.on('error', lost);
  w.on('exit', lost);
  return w;
}

/**
 * What decoding `text` on the worker learned, or null when the caller should decode it itself
 * (the worker failed, or the failure was not a malformed text).
 */
export function decodeOffThread(ask: Omit<OffThreadAsk, 'id'>): Promise<Learned | null> {
  try {
    worker ??= start();
  } catch {
    return Promise.resolve(null);
  }
  const id = ++next;
  return new Promise((resolve) => {
    waiting.set(id, (a) => {
      if (a?.decoded) resolve({ decoded: a.decoded });
      else if (a?.malformed !== undefined) resolve({ error: new MalformedError(a.malformed) });
      else resolve(null);
    });
    worker!.postMessage({ ...ask, id });
  });
}
