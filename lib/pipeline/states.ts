/** Processing states (docs/glossary.md "States and classes"). FAILED is not terminal: it holds the head. */
export type ProcStatus = 'PENDING' | 'FAILED' | 'SUCCEEDED' | 'SKIPPED' | 'DEAD';

/** Only these classes may be replayed (docs/glossary.md "States and classes"): the others need a fixed message, not a retry. */
export const REPLAYABLE_CLASSES = ['CODEC_ERROR', 'UNSUPPORTED', 'INFRA', 'EXHAUSTED'] as const;
