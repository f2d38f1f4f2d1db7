-- The relay reads the outbox only as a commit-ordered log (docs/outbox.md "The log and its cursors"):
-- the per-event claim and mark have no caller left. With them goes the per-target advisory lock the
-- claim took (hashtext('msgx:target:' || target)); a lease on the target's cursor row is the guard.
DROP FUNCTION msgx_outbox_claim(text, integer, timestamptz, timestamptz, text, bigint);
DROP FUNCTION msgx_outbox_mark(bigint[], text[], integer[], timestamptz[], text[], bigint[], timestamptz, text, bigint[], text[],
                               text[], integer[], bigint[], text[], boolean[]);

-- Events are written once and never updated: the half page kept free for their claimed versions
-- only made every insert fill twice the pages. New pages are filled whole; old ones stay as they are.
ALTER TABLE msg_event RESET (fillfactor);

-- msg_event_open stays: the log's discovery (lib/outbox/logLease.ts, msgx_outbox_open) walks it, one
-- probe per target. event_delivery keeps the outcomes the per-event relay wrote, until retention.
COMMENT ON FUNCTION msgx_event_delivery_cascade() IS
  'Trigger (statement level, AFTER DELETE ON msg_event): deletes the event_delivery outcomes of the deleted events (outcomes the per-event relay wrote, kept without a foreign key), as retention removes their events.';
