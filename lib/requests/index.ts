export { expireRequests, requestDay, requestReference, type RequestResult } from './send.ts';
export { reconcileRequests } from './reconcile.ts';
export { requestRoutes } from './routes.ts';
export { refdProcessor, readRefSet } from './reference.ts';
export { REQ_TRANSITIONS, canMove, type ReqStatus } from './track.ts';
