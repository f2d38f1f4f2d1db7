-- The outbox as a commit-ordered log (docs/outbox.md "The log and its cursors").
--
-- Each event records the transaction that wrote it. A reader takes two snapshots and reads what
-- became visible between them (PgQ's batches): an event whose transaction commits late is read
-- in the batch of its commit, never behind a cursor that passed its event_id. Rows written
-- before this migration have no writer and are read by event_id alone.
ALTER TABLE msg_event ADD COLUMN writer_xid xid8;
ALTER TABLE msg_event ALTER COLUMN writer_xid SET DEFAULT pg_current_xact_id();
CREATE INDEX msg_event_writer ON msg_event (writer_xid, target);

-- A plain INSERT from any service names target, key, type, value and headers; the rest defaults.
ALTER TABLE msg_event ALTER COLUMN next_attempt_at SET DEFAULT now();
ALTER TABLE msg_event ALTER COLUMN created_at SET DEFAULT now();
ALTER TABLE msg_event ALTER COLUMN source_kind SET DEFAULT 'external';

-- The target's row (004, the schd flush) becomes its cursor: the snapshot the last finished batch
-- ended at (snap_lo), the one an open batch ends at (snap_hi, NULL when none is open) and how far
-- into it delivery got (after_id). A target read as a log has snap_lo set.
ALTER TABLE outbox_target
  ADD COLUMN snap_lo pg_snapshot,
  ADD COLUMN snap_hi pg_snapshot,
  ADD COLUMN after_id bigint NOT NULL DEFAULT 0,
  ADD COLUMN lease_owner text,
  ADD COLUMN lease_until timestamptz,
  ADD COLUMN updated_at timestamptz;

-- The few events a target could not deliver: a failed head waiting for its next attempt, or dead.
CREATE TABLE outbox_exception (
  target           text NOT NULL,
  event_id         bigint NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz,
  last_error       text,
  dead             boolean NOT NULL DEFAULT false,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, event_id)
);
CREATE INDEX outbox_exception_dead ON outbox_exception (target, event_id) WHERE dead;

-- An event's state, derived: DEAD from its exception, SENT once its target's cursor passed it,
-- DELIVERING inside the open batch while the target is leased, PENDING otherwise.
CREATE FUNCTION msgx_outbox_state(p_target text, p_event_id bigint, p_writer xid8, p_now timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN x.dead THEN 'DEAD'
    WHEN t.snap_lo IS NULL OR p_writer IS NULL THEN 'PENDING'
    WHEN pg_visible_in_snapshot(p_writer, t.snap_lo) THEN 'SENT'
    WHEN t.snap_hi IS NOT NULL AND pg_visible_in_snapshot(p_writer, t.snap_hi) AND p_event_id <= t.after_id THEN 'SENT'
    WHEN t.snap_hi IS NOT NULL AND pg_visible_in_snapshot(p_writer, t.snap_hi) AND t.lease_until > p_now THEN 'DELIVERING'
    ELSE 'PENDING' END
  FROM (SELECT 1) one
  LEFT JOIN outbox_target t ON t.target = p_target
  LEFT JOIN outbox_exception x ON x.target = p_target AND x.event_id = p_event_id
$$;
