import type { ClaimedRow } from './types.ts';
import type { LogRow } from './logLease.ts';

/** schd sends the newest version of each flight in the batch; the older ones go with it (newest_id). */
export function markNewest(read: LogRow[], rows: ClaimedRow[]): void {
  const newest = new Map<string, { id: number; v: number }>();
  for (const r of read) {
    if (r.event_id === null) continue;
    const g = r.flid ?? r.partition_key ?? `event:${r.event_id}`;
    const v = r.state_version ?? -1;
    const cur = newest.get(g);
    if (!cur || v > cur.v || (v === cur.v && Number(r.event_id) > cur.id)) newest.set(g, { id: Number(r.event_id), v });
  }
  for (const r of rows) r.newest_id = newest.get(r.grp!)!.id;
}
