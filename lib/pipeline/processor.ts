import type { DecodedMessage } from '../codec/message.ts';
import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/db.ts';
import type { GroupScope } from './groupScope.ts';

/**
 * A processor applies one decoded message inside the pump's transaction (under a savepoint).
 * It writes its domain rows and its outbox events through `tx` and returns the terminal outcome.
 * To fail, it throws a MsgxError subclass (ProtocolError → DEAD, UnsupportedError/CodecError/
 * InfraError → FAILED and retried); everything it wrote is then rolled back to the savepoint.
 * It must never call anything outside PostgreSQL: no HTTP, no Kafka, no mailbox.
 */
export interface ProcessContext {
  tx: Queryable;
  msgId: number;
  message: DecodedMessage;
  now: Date;
  config: Config;
  /** The pump's group (absent when a processor is called on its own): a place for deferred work. */
  group?: GroupScope;
}

export type ProcessOutcome = { status: 'SUCCEEDED'; note?: string } | { status: 'SKIPPED'; note: string };

export type Processor = (ctx: ProcessContext) => Promise<ProcessOutcome>;

/** Processors keyed by `TYPE` or `TYPE:STYP` (the more specific key wins). */
export class ProcessorRegistry {
  readonly #byKey = new Map<string, Processor>();

  register(key: string, processor: Processor): this {
    this.#byKey.set(key.toUpperCase(), processor);
    return this;
  }

  resolve(message: Pick<DecodedMessage, 'type' | 'subtype'>): Processor | undefined {
    return this.#byKey.get(`${message.type}:${message.subtype}`) ?? this.#byKey.get(message.type);
  }
}

/** Types msgx receives but deliberately does not act on (docs/flights.md "Messages"): SKIPPED, never malformed. */
export const IGNORED_TYPES: ReadonlySet<string> = new Set(['LDM', 'REGN', 'RSTA', 'EROR']);
