import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A record as the twin's file sink (its stand-in for Kafka) writes it, one JSON line per record. */
export interface SinkRecord {
  topic: string;
  key: string;
  value: string;
  headers: Record<string, string>;
}

/** The records of one topic in the file sink of the data directory `msgxDir` (`<msgxDir>/events/<topic>.jsonl`), in file order. */
export function fileSink(msgxDir: string, topic: string): SinkRecord[] {
  const file = join(msgxDir, 'events', `${topic}.jsonl`);
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as SinkRecord);
}
