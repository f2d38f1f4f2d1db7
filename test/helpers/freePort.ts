import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';

/** A TCP port nobody listens on right now on 127.0.0.1 (the kernel's choice). */
export function freePort(): Promise<number> {
  return listenOnce(0);
}

/**
 * A free port below the kernel's ephemeral range, for a port that must be chosen long before it is
 * bound (a site setting baked into a synth minutes earlier). The kernel hands out ephemeral ports
 * to every outgoing connection and every listen(0), so a port from freePort() can be taken by then;
 * one below the range can only be taken by someone naming it.
 */
export async function reservablePort(): Promise<number> {
  const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  const top = Math.min(low, 32768) - 1;
  for (let tries = 0; tries < 50; tries++) {
    const port = 20000 + Math.floor(Math.random() * (top - 20000));
    try {
      return await listenOnce(port);
    } catch {
      // taken: try another
    }
  }
  throw new Error(`no free port between 20000 and ${top}`);
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => {
      const bound = (srv.address() as AddressInfo).port;
      srv.close(() => resolve(bound));
    });
  });
}
