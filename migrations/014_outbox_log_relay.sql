-- The dispatcher reads the log (docs/outbox.md "The log and its cursors"): per target a lease on
-- its cursor row, a batch between two snapshots, the cursor moved past it. Events are not updated.

-- A target held by an outage of its destination: no event is charged, the whole target waits
-- until hold_until and shows stalled with the reason.
ALTER TABLE outbox_target
  ADD COLUMN hold_until timestamptz,
  ADD COLUMN stalled_since timestamptz,
  ADD COLUMN last_error text;

-- The publishers that already took an exception's event (a fan-out retry skips them), and whether
-- it failed itself or only waits behind an earlier failed event of its key.
-- at_head: the failed event the target's cursor stops before (the whole target waits for its next
-- attempt, nothing overtakes it); otherwise the cursor passed it (a replayed event, or a flight of
-- msgx.schd, whose flights do not hold each other) and it is retried on its own, ahead of the later
-- events of its key.
ALTER TABLE outbox_exception
  ADD COLUMN delivered_to text[] NOT NULL DEFAULT '{}',
  ADD COLUMN partition_key text,
  ADD COLUMN at_head boolean NOT NULL DEFAULT false;
CREATE INDEX outbox_exception_open ON outbox_exception (target, event_id) WHERE NOT dead;

-- A cursor that has seen nothing: a target's first batch starts at its oldest unsettled event.
CREATE FUNCTION msgx_outbox_origin() RETURNS pg_snapshot LANGUAGE sql IMMUTABLE AS $$ SELECT '1:1:'::pg_snapshot $$;

-- An event with an exception that is not dead failed (or waits behind one of its key) and will be
-- tried again: PENDING, though the cursor passed it.
CREATE OR REPLACE FUNCTION msgx_outbox_state(p_target text, p_event_id bigint, p_writer xid8, p_now timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN x.dead THEN 'DEAD'
    WHEN x.event_id IS NOT NULL THEN 'PENDING'
    WHEN t.snap_lo IS NULL OR p_writer IS NULL THEN 'PENDING'
    WHEN pg_visible_in_snapshot(p_writer, t.snap_lo) THEN 'SENT'
    WHEN t.snap_hi IS NOT NULL AND pg_visible_in_snapshot(p_writer, t.snap_hi) AND p_event_id <= t.after_id THEN 'SENT'
    WHEN t.snap_hi IS NOT NULL AND pg_visible_in_snapshot(p_writer, t.snap_hi) AND t.lease_until > p_now THEN 'DELIVERING'
    ELSE 'PENDING' END
  FROM (SELECT 1) one
  LEFT JOIN outbox_target t ON t.target = p_target
  LEFT JOIN outbox_exception x ON x.target = p_target AND x.event_id = p_event_id
$$;

-- The state every reader shows: a row the per-event path settled or leased (status written before
-- the relay read the log) keeps what it says; any other is derived from cursor, lease, exceptions.
CREATE FUNCTION msgx_event_state(p_status text, p_target text, p_event_id bigint, p_writer xid8, p_now timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN p_status <> 'PENDING' THEN p_status ELSE msgx_outbox_state(p_target, p_event_id, p_writer, p_now) END
$$;

-- Every open (PENDING or DELIVERING) event with what its target's head shows, set-based: one probe
-- per target for the targets, then per target the events its cursor has not passed (a range of
-- writer_xid from the cursor's xmin), the exceptions that are not dead, or, for a target without
-- a cursor, the rows still open by the per-event columns.
CREATE FUNCTION msgx_outbox_open(p_now timestamptz)
RETURNS TABLE (target text, event_id bigint, state text, attempts integer, next_attempt_at timestamptz,
               last_error text, created_at timestamptz, stalled_since timestamptz)
LANGUAGE sql STABLE AS $$
  WITH RECURSIVE tg AS (
    (SELECT m.target FROM msg_event m WHERE m.sent_at IS NULL AND m.dead_at IS NULL ORDER BY m.target LIMIT 1)
    UNION ALL
    SELECT (SELECT m.target FROM msg_event m WHERE m.sent_at IS NULL AND m.dead_at IS NULL AND m.target > tg.target
            ORDER BY m.target LIMIT 1)
    FROM tg WHERE tg.target IS NOT NULL
  ), cur AS (
    SELECT tg.target, t.snap_lo, t.snap_hi, t.after_id, t.lease_until, t.hold_until, t.stalled_since, t.last_error
    FROM tg LEFT JOIN outbox_target t ON t.target = tg.target WHERE tg.target IS NOT NULL
  )
  -- Passed by no cursor yet.
  SELECT m.target, m.event_id,
         CASE WHEN pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND c.lease_until > p_now THEN 'DELIVERING' ELSE 'PENDING' END,
         0, coalesce(c.hold_until, m.created_at), c.last_error, m.created_at, c.stalled_since
  FROM cur c JOIN msg_event m ON m.target = c.target
  WHERE c.snap_lo IS NOT NULL AND m.status = 'PENDING' AND m.sent_at IS NULL AND m.dead_at IS NULL
    AND m.writer_xid >= pg_snapshot_xmin(c.snap_lo) AND NOT pg_visible_in_snapshot(m.writer_xid, c.snap_lo)
    AND NOT (c.snap_hi IS NOT NULL AND pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND m.event_id <= c.after_id)
    AND NOT EXISTS (SELECT 1 FROM outbox_exception x WHERE x.target = m.target AND x.event_id = m.event_id)
  UNION ALL
  -- Passed, but failed (or waiting behind a failed event of its key).
  SELECT x.target, x.event_id, 'PENDING', x.attempts, coalesce(x.next_attempt_at, p_now), coalesce(x.last_error, c.last_error),
         m.created_at, c.stalled_since
  FROM cur c JOIN outbox_exception x ON x.target = c.target AND NOT x.dead JOIN msg_event m ON m.event_id = x.event_id
  WHERE m.status = 'PENDING' AND m.sent_at IS NULL AND m.dead_at IS NULL
  UNION ALL
  -- A target the per-event path delivers (no cursor), or rows it leased before the switch.
  SELECT m.target, m.event_id, m.status, m.attempts, m.next_attempt_at, m.last_error, m.created_at, m.stalled_since
  FROM cur c JOIN msg_event m ON m.target = c.target
  WHERE m.status IN ('PENDING', 'DELIVERING') AND m.sent_at IS NULL AND m.dead_at IS NULL
    AND (c.snap_lo IS NULL OR m.status = 'DELIVERING')
$$;

-- Every dead event: those the per-event path marked DEAD and those the log relay gave up.
CREATE FUNCTION msgx_outbox_dead()
RETURNS TABLE (target text, event_id bigint, attempts integer, last_error text, dead_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT m.target, m.event_id, m.attempts, m.last_error, m.dead_at FROM msg_event m WHERE m.status = 'DEAD' AND m.dead_at IS NOT NULL
  UNION ALL
  SELECT x.target, x.event_id, x.attempts, x.last_error, x.updated_at FROM outbox_exception x WHERE x.dead
$$;

COMMENT ON FUNCTION msgx_outbox_origin() IS
  'The snapshot a new target''s cursor starts at: it sees no transaction, so the first batch holds every event not settled by the per-event path. lib/outbox/logDispatch.ts.';
COMMENT ON FUNCTION msgx_outbox_state(text, bigint, xid8, timestamptz) IS
  'An event''s state for one target, derived from the log: DEAD from its exception, PENDING while it has an exception that is not dead (a failed head or an event waiting behind one of its key), SENT once the target''s cursor passed it, DELIVERING inside the open batch while the target is leased, PENDING otherwise. lib/outbox/commitLog.ts.';
COMMENT ON FUNCTION msgx_event_state(text, text, bigint, xid8, timestamptz) IS
  'The event state every reader shows: the stored status where the per-event path settled or leased the row, else msgx_outbox_state. lib/outbox/sourceEvents.ts, lib/outbox/replay.ts, lib/txmsg/store.ts.';
COMMENT ON FUNCTION msgx_outbox_open(timestamptz) IS
  'Every open (PENDING or DELIVERING) event, derived set-based: per target the events its cursor has not passed, its exceptions that are not dead, or the per-event path''s open rows; with attempts, next attempt, last error and the target''s stall. lib/outbox/queries.ts, lib/outbox/metrics.ts, lib/outbox/missingTopics.ts.';
COMMENT ON FUNCTION msgx_outbox_dead() IS
  'Every dead event: marked DEAD by the per-event path or given up by the log relay (a dead exception), with attempts, last error and when. lib/outbox/queries.ts, lib/outbox/replay.ts.';
