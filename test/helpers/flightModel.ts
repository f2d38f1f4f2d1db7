import { waitFor } from './services.ts';

export type Fields = Record<string, string | Record<string, string>[]>;

/**
 * A journey's independent model of its flights, built by the test by hand from what it sent
 * (never read back from msgx's tables): per FLID, the fields a reader must see, the state version
 * (one per message that changed it) and, where the test knows them, the mailbox IDs of those
 * messages in mailbox-ID order (the order msgx must apply them in).
 */
export class FlightModel extends Map<string, { fields: Fields; version: number; msgIds?: number[] }> {
  /** A message (mailbox ID `msgId`, when known) changed `flid`: its fields merge in and its version steps by one. */
  apply(flid: string, fields: Fields, msgId?: number): void {
    const m = this.get(flid)!;
    m.fields = { ...m.fields, ...fields };
    m.version++;
    if (msgId === undefined) delete m.msgIds;
    else if (m.msgIds) m.msgIds = [...m.msgIds, msgId].sort((a, b) => a - b);
  }

  /**
   * The `source.msgId` sequence msgx.msg must carry for `flid` (the mailbox IDs of the messages that
   * changed it, in ID order), or undefined when the test did not learn every ID.
   */
  expectedSources(flid: string): number[] | undefined {
    const m = this.get(flid)!;
    return m.msgIds && m.msgIds.length === m.version ? m.msgIds : undefined;
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
