/** Processing states (docs/glossary.md "States and classes"). FAILED is not terminal: it holds the head. */
export type ProcStatus = 'PENDING' | 'FAILED' | 'SUCCEEDED' | 'SKIPPED' | 'DEAD';

/** The states a message ends in: it is back-filled to the mailbox, and archived after retention. */
export const TERMINAL_STATUSES = ['SUCCEEDED', 'SKIPPED', 'DEAD'] as const satisfies readonly ProcStatus[];

export function isTerminalStatus(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** Only these classes may be replayed (docs/glossary.md "States and classes"): the others need a fixed message, not a retry. */
export const REPLAYABLE_CLASSES = ['CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED'] as const;
