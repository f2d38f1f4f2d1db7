import { appendFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../shared/clock.ts';
import { systemClock } from '../../shared/clock.ts';
import type { OutRecord, Publisher, PublishResult } from '../types.ts';

/**
 * The embedded stand-in for Kafka when no brokers are configured (twin only; the cloud refuses to
 * start without brokers). Appends one JSON line `{topic, key, value, headers, at}` per record to
 * `<dir>/<topic>.jsonl`, the whole batch in one write, so a batch is never half written by us.
 */
export class FileSinkPublisher implements Publisher {
  readonly name: string;
  readonly #dir: string;
  readonly #clock: Clock;
  #made = false;

  constructor(options: { dir?: string; clock?: Clock; name?: string } = {}) {
    this.name = options.name ?? 'file';
    this.#dir = options.dir ?? join(process.cwd(), '.msgx', 'events');
    this.#clock = options.clock ?? systemClock;
  }

  get dir(): string {
    return this.#dir;
  }

  async publish(records: OutRecord[], signal: AbortSignal): Promise<PublishResult[]> {
    if (records.length === 0) return [];
    try {
      if (!this.#made) {
        await mkdir(this.#dir, { recursive: true });
        this.#made = true;
      }
      const at = this.#clock.now().toISOString();
      const byTopic = new Map<string, string[]>();
      for (const r of records) {
        const line = JSON.stringify({ topic: r.topic, key: r.key, value: r.value, headers: r.headers, at });
        const list = byTopic.get(r.topic) ?? [];
        list.push(line);
        byTopic.set(r.topic, list);
      }
      for (const [topic, lines] of byTopic) {
        if (signal.aborted) throw new Error('publish timeout');
        await appendFile(join(this.#dir, `${safeFileName(topic)}.jsonl`), lines.join('\n') + '\n');
      }
      return records.map(() => ({ ok: true as const }));
    } catch (err) {
      const error = `${(err as Error).name}: ${(err as Error).message}`;
      return records.map(() => ({ ok: false as const, error }));
    }
  }

  async close(): Promise<void> {}
}

/** Topic names are [a-zA-Z0-9._-]; anything else (from a tx producer) must not escape the folder. */
export function safeFileName(topic: string): string {
  return topic.replace(/[^a-zA-Z0-9._-]/g, '_').replace(/^\.+/, '_');
}
