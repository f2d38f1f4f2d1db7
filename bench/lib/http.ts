import { Agent, request } from 'node:http';
import { createServer, type Server } from 'node:net';

export const agent = new Agent({ keepAlive: true, maxSockets: 512 });

export interface Reply {
  status: number;
  body: string;
}

/** One HTTP request over the keep-alive agent; network errors reject. */
export function call(port: number, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers: body === undefined ? headers : { 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s: Server = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Open-loop load: request i is due at t0 + i/rate and is fired when due, whether or not earlier
 * ones answered. `fire` gets the scheduled time; latency is counted from it (so a late generator
 * or a stalled server shows up in the numbers instead of hiding: no coordinated omission).
 */
export async function openLoop(
  rate: number,
  seconds: number,
  fire: (i: number, scheduledAt: number) => void,
  onTick?: (i: number) => void,
): Promise<{ late: number }> {
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const t0 = performance.now() + 20;
  let i = 0;
  let late = 0;
  while (i < total) {
    const now = performance.now();
    while (i < total && t0 + i * interval <= now) {
      if (now - (t0 + i * interval) > 5) late++;
      fire(i, t0 + i * interval);
      i++;
    }
    onTick?.(i);
    const wait = t0 + i * interval - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, Math.max(0, Math.floor(wait))));
    else await new Promise((r) => setImmediate(r));
  }
  return { late };
}
