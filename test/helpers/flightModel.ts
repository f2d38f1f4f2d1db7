import { waitFor } from './services.ts';

export type Fields = Record<string, string | Record<string, string>[]>;

/**
 * A journey's independent model of its flights, built by the test by hand from what it sent
 * (never read back from msgx's tables): per FLID, the fields a reader must see and the state
 * version (one per message that changed it).
 */
export class FlightModel extends Map<string, { fields: Fields; version: number }> {
  /** A message changed `flid`: its fields merge in and its version steps by one. */
  apply(flid: string, fields: Fields): void {
    const m = this.get(flid)!;
    m.fields = { ...m.fields, ...fields };
    m.version++;
  }

  /** Waits until the twin's read API at `base` shows every modelled version (the roles work asynchronously). */
  async settled(base: string, flids: string[]): Promise<void> {
    await waitFor(
      async () => {
        for (const flid of flids) {
          const res = await fetch(`${base}/v1/flights/${flid}`);
          if (res.status !== 200 || ((await res.json()) as { stateVersion: number }).stateVersion !== this.get(flid)!.version) return false;
        }
        return true;
      },
      { timeoutMs: 60_000, what: 'the flights to reach their modelled versions' },
    );
  }
}
