-- What each of msgx's SQL functions does, where psql's \df+ and docs/schema.sql show it.
COMMENT ON FUNCTION msgx_event_delivery_cascade() IS
  'Trigger (statement level, AFTER DELETE ON msg_event): deletes the event_delivery outcomes of the deleted events, which event_delivery keeps without a foreign key so the mark writes no key checks.';
COMMENT ON FUNCTION msgx_outbox_claim(text, integer, timestamptz, timestamptz, text, bigint) IS
  'The relay''s claim of a target''s head run: under the target''s advisory lock (held elsewhere: one row with locked = true), the open events after p_after in event_id order, up to p_limit and cut before the first one leased elsewhere or not yet due (a head that failed before goes alone), are leased to p_me until p_lock_until (DELIVERING) and returned with the publishers that already have them. lib/outbox/claim.ts.';
COMMENT ON FUNCTION msgx_outbox_mark(bigint[], text[], integer[], timestamptz[], text[], bigint[], timestamptz, text, bigint[], text[], text[], integer[], bigint[], text[], boolean[]) IS
  'Records a whole batch in one call: per event (p_ids, in step with p_status, p_attempts, p_next, p_error, p_sent_as, p_stalled) its new state, and per publisher outcome (o_ids, in step with o_publisher, o_outcome, o_partition, o_offset, o_error) a row in event_delivery; only rows still leased to p_me change. Returns the events whose state changed. lib/outbox/mark.ts.';
COMMENT ON FUNCTION msgx_outbox_state(text, bigint, xid8, timestamptz) IS
  'An event''s state for one target, derived from the log: DEAD from its exception, SENT once the target''s cursor passed it, DELIVERING inside the open batch while the target is leased, PENDING otherwise. lib/outbox/commitLog.ts.';
