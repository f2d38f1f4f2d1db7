/**
 * The life of a transactional message (docs/txmsg.md "States") as ONE table of allowed moves. Every status
 * change in lib/txmsg goes through `nextStatus`, so this table is the whole state machine.
 */
export const TX_STATUSES = ['PREPARED', 'COMMITTED', 'DELIVERED', 'CONSUMED', 'ROLLED_BACK', 'DEAD'] as const;
export type TxStatus = (typeof TX_STATUSES)[number];

export const TX_EVENTS = [
  'commit', // the producer (or its check-back answer) confirms the local transaction
  'rollback', // the producer (or its check-back answer) says the local transaction failed
  'checks-exhausted', // MSGX_TX_CHECK_MAX check-backs without an answer
  'sent', // the relay recorded the delivery SENT
  'delivery-failed', // the relay gave the delivery up (its event went DEAD)
  'redeliver', // unacknowledged and its next delivery is due
  'unacked', // unacknowledged after the last delivery of the schedule
  'ack', // the consumer confirms it consumed the message
  'resend-unconfirmed', // operator: a message that died before commit is checked again
  'resend-delivered', // operator: a committed message that died is delivered again, fresh schedule
] as const;
export type TxEvent = (typeof TX_EVENTS)[number];

/** from → event → to. Anything not listed is an impossible transition. */
export const TX_TRANSITIONS: Readonly<Record<TxStatus, Partial<Record<TxEvent, TxStatus>>>> = {
  PREPARED: { commit: 'COMMITTED', rollback: 'ROLLED_BACK', 'checks-exhausted': 'DEAD' },
  // An ack may overtake the relay's SENT record (the consumer was fast); it still counts.
  COMMITTED: { sent: 'DELIVERED', ack: 'CONSUMED', 'delivery-failed': 'DEAD' },
  DELIVERED: { redeliver: 'COMMITTED', ack: 'CONSUMED', unacked: 'DEAD' },
  CONSUMED: {},
  ROLLED_BACK: {},
  // A late ack on a message that died unacknowledged is the truth: the consumer did consume it.
  DEAD: { 'resend-unconfirmed': 'PREPARED', 'resend-delivered': 'COMMITTED', ack: 'CONSUMED' },
};

/** The status `event` leads to from `from`, or undefined when the move is not allowed. */
export function nextStatus(from: TxStatus, event: TxEvent): TxStatus | undefined {
  return TX_TRANSITIONS[from][event];
}
