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

  // Every move NOT allowed, written out by hand too (not derived from LEGAL), so a transition the
  // code adds or drops by mistake fails one list or the other.
  const illegal: [TxStatus, TxEvent][] = [
    ['PREPARED', 'sent'],
    ['PREPARED', 'delivery-failed'],
    ['PREPARED', 'redeliver'],
    ['PREPARED', 'unacked'],
    ['PREPARED', 'ack'],
    ['PREPARED', 'resend-unconfirmed'],
    ['PREPARED', 'resend-delivered'],
    ['COMMITTED', 'commit'],
    ['COMMITTED', 'rollback'],
    ['COMMITTED', 'checks-exhausted'],
    ['COMMITTED', 'redeliver'],
    ['COMMITTED', 'unacked'],
    ['COMMITTED', 'resend-unconfirmed'],
    ['COMMITTED', 'resend-delivered'],
    ['DELIVERED', 'commit'],
    ['DELIVERED', 'rollback'],
    ['DELIVERED', 'checks-exhausted'],
    ['DELIVERED', 'sent'],
    ['DELIVERED', 'delivery-failed'],
    ['DELIVERED', 'resend-unconfirmed'],
    ['DELIVERED', 'resend-delivered'],
    ['CONSUMED', 'commit'],
    ['CONSUMED', 'rollback'],
    ['CONSUMED', 'checks-exhausted'],
    ['CONSUMED', 'sent'],
    ['CONSUMED', 'delivery-failed'],
    ['CONSUMED', 'redeliver'],
    ['CONSUMED', 'unacked'],
    ['CONSUMED', 'ack'],
    ['CONSUMED', 'resend-unconfirmed'],
    ['CONSUMED', 'resend-delivered'],
    ['ROLLED_BACK', 'commit'],
    ['ROLLED_BACK', 'rollback'],
    ['ROLLED_BACK', 'checks-exhausted'],
    ['ROLLED_BACK', 'sent'],
    ['ROLLED_BACK', 'delivery-failed'],
    ['ROLLED_BACK', 'redeliver'],
    ['ROLLED_BACK', 'unacked'],
    ['ROLLED_BACK', 'ack'],
    ['ROLLED_BACK', 'resend-unconfirmed'],
    ['ROLLED_BACK', 'resend-delivered'],
    ['DEAD', 'commit'],
    ['DEAD', 'rollback'],
    ['DEAD', 'checks-exhausted'],
    ['DEAD', 'sent'],
    ['DEAD', 'delivery-failed'],
    ['DEAD', 'redeliver'],
    ['DEAD', 'unacked'],
  ];
  it.each(illegal)('%s --%s--> is rejected', (from, event) => {
    expect(nextStatus(from, event)).toBeUndefined();
  });

  it('covers every (state, event) pair exactly once between the two lists', () => {
    const pairs = [...LEGAL.map(([f, e]) => `${f} ${e}`), ...illegal.map(([f, e]) => `${f} ${e}`)];
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(pairs.length).toBe(TX_STATUSES.length * TX_EVENTS.length);
    const count = Object.values(TX_TRANSITIONS).reduce((n, moves) => n + Object.keys(moves).length, 0);
    expect(count).toBe(LEGAL.length);
  });

  it('CONSUMED and ROLLED_BACK are terminal', () => {
    expect(TX_TRANSITIONS.CONSUMED).toEqual({});
    expect(TX_TRANSITIONS.ROLLED_BACK).toEqual({});
  });
});
