-- Open events are found by ranges the planner can see (docs/outbox.md "The log and its cursors").
-- Against a cursor's xmin, a value it cannot know, the planner takes `writer_xid >= xmin` for a third
-- of msg_event and hash-joins all of it, delivered events included: with 50,000 delivered events
-- msgx_outbox_open took ~100 ms (stats, console, health), most of it reading rows the cursors passed
-- long ago. Per target, in a subquery planned with the cursor as a parameter, the range gets an upper
-- bound every row meets (nothing visible was written at or after the current snapshot's xmax), and a
-- closed range of two parameters is estimated as a sliver: msg_event_writer walks only the rows
-- written since the cursor. Rows the per-event path leased before the log get an index of their own,
-- which a database that never ran that path keeps empty.
CREATE INDEX msg_event_leased ON msg_event (target, event_id) WHERE status = 'DELIVERING' AND sent_at IS NULL AND dead_at IS NULL;

CREATE OR REPLACE FUNCTION msgx_outbox_open(p_now timestamptz)
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
  -- Passed by no cursor yet. OFFSET 0 keeps each lateral subquery planned on its own, with the
  -- cursor's columns as parameters.
  SELECT c.target, m.event_id,
         CASE WHEN pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND c.lease_until > p_now THEN 'DELIVERING' ELSE 'PENDING' END,
         0, coalesce(c.hold_until, m.created_at), c.last_error, m.created_at, c.stalled_since
  FROM cur c CROSS JOIN LATERAL (
    SELECT m.event_id, m.writer_xid, m.created_at FROM msg_event m
    WHERE m.target = c.target AND m.status = 'PENDING' AND m.sent_at IS NULL AND m.dead_at IS NULL
      AND m.writer_xid >= pg_snapshot_xmin(c.snap_lo) AND m.writer_xid < pg_snapshot_xmax(pg_current_snapshot())
      AND NOT pg_visible_in_snapshot(m.writer_xid, c.snap_lo)
      AND NOT (c.snap_hi IS NOT NULL AND pg_visible_in_snapshot(m.writer_xid, c.snap_hi) AND m.event_id <= c.after_id)
      AND NOT EXISTS (SELECT 1 FROM outbox_exception x WHERE x.target = m.target AND x.event_id = m.event_id)
    OFFSET 0) m
  WHERE c.snap_lo IS NOT NULL
  UNION ALL
  -- Passed, but failed (or waiting behind a failed event of its key).
  SELECT x.target, x.event_id, 'PENDING', x.attempts, coalesce(x.next_attempt_at, p_now), coalesce(x.last_error, c.last_error),
         m.created_at, c.stalled_since
  FROM cur c JOIN outbox_exception x ON x.target = c.target AND NOT x.dead JOIN msg_event m ON m.event_id = x.event_id
  WHERE m.status = 'PENDING' AND m.sent_at IS NULL AND m.dead_at IS NULL
  UNION ALL
  -- A target the per-event path delivered (no cursor yet): its rows still open by the per-event columns.
  SELECT m.target, m.event_id, m.status, m.attempts, m.next_attempt_at, m.last_error, m.created_at, m.stalled_since
  FROM cur c CROSS JOIN LATERAL (
    SELECT m.* FROM msg_event m
    WHERE m.target = c.target AND m.status IN ('PENDING', 'DELIVERING') AND m.sent_at IS NULL AND m.dead_at IS NULL
    OFFSET 0) m
  WHERE c.snap_lo IS NULL
  UNION ALL
  -- Rows the per-event path leased before its target's cursor began.
  SELECT m.target, m.event_id, m.status, m.attempts, m.next_attempt_at, m.last_error, m.created_at, m.stalled_since
  FROM cur c CROSS JOIN LATERAL (
    SELECT m.* FROM msg_event m
    WHERE m.target = c.target AND m.status = 'DELIVERING' AND m.sent_at IS NULL AND m.dead_at IS NULL
    OFFSET 0) m
  WHERE c.snap_lo IS NOT NULL
$$;

COMMENT ON FUNCTION msgx_outbox_open(timestamptz) IS
  'Every open (PENDING or DELIVERING) event, derived set-based: per target the events its cursor has not passed (msg_event_writer from the cursor''s xmin), its exceptions that are not dead, or the per-event path''s open rows; with attempts, next attempt, last error and the target''s stall. lib/outbox/queries.ts, lib/outbox/metrics.ts, lib/outbox/missingTopics.ts, lib/outbox/retention.ts.';
