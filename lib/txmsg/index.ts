/** Transactional messages (docs/txmsg.md): what the rest of msgx uses. */
export { txmsgRoutes } from './routes.ts';
export { checkBackOnce, type CheckBackResult } from './checkBack.ts';
export { redeliverOnce, type RedeliverResult } from './redeliver.ts';
export { archiveConsumed } from './archive.ts';
export { txmsgSentHook, txmsgDeadHook, txmsgRetryHook, type SettledEvent } from './hooks.ts';
export { deadTxMessages, type DeadFilter } from './dead.ts';
export { resend } from './resend.ts';
export { TX_STATUSES, TX_TRANSITIONS, type TxStatus } from './states.ts';
export type { TxMessageView } from './view.ts';
