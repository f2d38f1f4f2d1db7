import { describe, expect, it } from 'vitest';
import { nextStatus, TX_EVENTS, TX_STATUSES, TX_TRANSITIONS, type TxEvent, type TxStatus } from '../../lib/txmsg/states.ts';

// The whole state machine, written out again by hand: a change to the table must change this too.
const LEGAL: [TxStatus, TxEvent, TxStatus][] = [
  ['PREPARED', 'commit', 'COMMITTED'],
  ['PREPARED', 'rollback', 'ROLLED_BACK'],
  ['PREPARED', 'checks-exhausted', 'DEAD'],
  ['COMMITTED', 'sent', 'DELIVERED'],
  ['COMMITTED', 'ack', 'CONSUMED'],
  ['COMMITTED', 'delivery-failed', 'DEAD'],
  ['DELIVERED', 'redeliver', 'COMMITTED'],
  ['DELIVERED', 'ack', 'CONSUMED'],
  ['DELIVERED', 'unacked', 'DEAD'],
  ['DEAD', 'resend-unconfirmed', 'PREPARED'],
  ['DEAD', 'resend-delivered', 'COMMITTED'],
  ['DEAD', 'ack', 'CONSUMED'],
];

describe('txmsg transition table', () => {
  it.each(LEGAL)('%s --%s--> %s is allowed', (from, event, to) => {
    expect(nextStatus(from, event)).toBe(to);
  });

  const illegal = TX_STATUSES.flatMap((from) =>
    TX_EVENTS.filter((event) => !LEGAL.some(([f, e]) => f === from && e === event)).map((event) => [from, event] as const),
  );
  it.each(illegal)('%s --%s--> is rejected', (from, event) => {
    expect(nextStatus(from, event)).toBeUndefined();
  });

  it('covers every (state, event) pair exactly once between the two lists', () => {
    expect(LEGAL.length + illegal.length).toBe(TX_STATUSES.length * TX_EVENTS.length);
    const count = Object.values(TX_TRANSITIONS).reduce((n, moves) => n + Object.keys(moves).length, 0);
    expect(count).toBe(LEGAL.length);
  });

  it('CONSUMED and ROLLED_BACK are terminal', () => {
    expect(TX_TRANSITIONS.CONSUMED).toEqual({});
    expect(TX_TRANSITIONS.ROLLED_BACK).toEqual({});
  });
});
