-- Cheaper delivery bookkeeping per event (docs/outbox.md "What a batch costs the database").
--
-- Every event is written by the relay twice, once by the claim (DELIVERING, lock_until, locked_by)
-- and once by the mark (SENT or DEAD), plus one event_delivery row per publisher. The claim was the
-- dearest of these: status appeared in the predicates of msg_event_open and msg_event_dead, so a
-- claim could never be a HOT update and added three index entries per event (primary key, the
-- open index, the source index). Here the two partial indexes are keyed on sent_at/dead_at
-- instead, which a claim does not change, and msg_event leaves room on each page for the claimed
-- version: a claim becomes a HOT update, with no index entry at all.

-- The new predicates stand for the statuses; these constraints keep them in step, so no open
-- event can be missing from the open index (it would never be delivered) and no dead one from the
-- dead index. Rows that an older version left out of step are set right first.
UPDATE msg_event SET sent_at = NULL, dead_at = NULL
WHERE status IN ('PENDING', 'DELIVERING') AND (sent_at IS NOT NULL OR dead_at IS NOT NULL);
UPDATE msg_event SET dead_at = coalesce(sent_at, created_at) WHERE status = 'DEAD' AND dead_at IS NULL;
ALTER TABLE msg_event ADD CONSTRAINT msg_event_open_unsettled
  CHECK (status NOT IN ('PENDING', 'DELIVERING') OR (sent_at IS NULL AND dead_at IS NULL)) NOT VALID;
ALTER TABLE msg_event ADD CONSTRAINT msg_event_dead_at_set CHECK (status <> 'DEAD' OR dead_at IS NOT NULL) NOT VALID;
ALTER TABLE msg_event VALIDATE CONSTRAINT msg_event_open_unsettled;
ALTER TABLE msg_event VALIDATE CONSTRAINT msg_event_dead_at_set;

-- Queries over open events say `status IN ('PENDING', 'DELIVERING') AND sent_at IS NULL AND
-- dead_at IS NULL` (the planner needs the index predicate in the query); dead ones
-- `status = 'DEAD' AND dead_at IS NOT NULL`.
DROP INDEX msg_event_open;
CREATE INDEX msg_event_open ON msg_event (target, event_id) WHERE sent_at IS NULL AND dead_at IS NULL;
DROP INDEX msg_event_dead;
CREATE INDEX msg_event_dead ON msg_event (target, event_id) WHERE dead_at IS NOT NULL;

-- Half of each new page stays free for the claimed versions of its rows (HOT needs the new
-- version on the same page). The mark moves the row on; pruning and vacuum give the space back.
ALTER TABLE msg_event SET (fillfactor = 50);

-- event_delivery's foreign key cost a row lock on msg_event per outcome (FOR KEY SHARE, a write
-- of its own). Its only writer is the mark, with the ids of rows it holds; what the key did for
-- deletes (the outcomes go with their event) this statement-level trigger does.
ALTER TABLE event_delivery DROP CONSTRAINT event_delivery_event_id_fkey;
CREATE FUNCTION msgx_event_delivery_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM event_delivery d USING gone g WHERE d.event_id = g.event_id;
  RETURN NULL;
END $$;
CREATE TRIGGER msg_event_delivery_cascade AFTER DELETE ON msg_event
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION msgx_event_delivery_cascade();

-- The claim of 004 over the new open index, committing without waiting for its WAL flush: a claim
-- lost in a crash leaves its rows PENDING, and they are claimed again (at least once, as after any
-- crash). The ordering argument (lib/outbox/dispatcher.ts) does not change.
CREATE OR REPLACE FUNCTION msgx_outbox_claim(p_target text, p_limit integer, p_now timestamptz, p_lock_until timestamptz,
                                             p_me text, p_after bigint)
RETURNS TABLE (locked boolean, event_id bigint, partition_key text, event_type text, value text, headers jsonb,
               attempts integer, source_kind text, source_id text, delivered_to text[])
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('msgx:target:' || p_target)) THEN
    RETURN QUERY SELECT true, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::integer, NULL::text, NULL::text, NULL::text[];
    RETURN;
  END IF;
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH open AS (
    SELECT m.event_id, m.attempts, m.status, m.lock_until, m.next_attempt_at FROM msg_event m
    WHERE m.target = p_target AND m.status IN ('PENDING', 'DELIVERING') AND m.sent_at IS NULL AND m.dead_at IS NULL
      AND m.event_id > p_after
    ORDER BY m.event_id LIMIT p_limit
  ), run AS (
    -- Cut before the first row leased by someone else or not due; a head that failed before goes alone.
    SELECT o.event_id,
           bool_and((o.status = 'PENDING' OR o.lock_until <= p_now) AND o.next_attempt_at <= p_now) OVER w AS ok,
           row_number() OVER w AS rn,
           first_value(o.attempts) OVER w AS head_attempts
    FROM open o WINDOW w AS (ORDER BY o.event_id)
  ), upd AS (
    UPDATE msg_event e SET status = 'DELIVERING', lock_until = p_lock_until, locked_by = p_me
    WHERE e.event_id = ANY (ARRAY(SELECT r.event_id FROM run r WHERE r.ok AND (r.head_attempts = 0 OR r.rn = 1)))
      AND (e.status = 'PENDING' OR e.lock_until <= p_now)
    RETURNING e.event_id, e.partition_key, e.event_type, e.value, e.headers, e.attempts, e.source_kind, e.source_id
  )
  SELECT false, u.event_id, u.partition_key, u.event_type, u.value, u.headers, u.attempts, u.source_kind, u.source_id,
         (SELECT array_agg(d.publisher) FROM event_delivery d WHERE d.event_id = u.event_id AND d.outcome = 'ok')
  FROM upd u;
END $$;

-- The mark of 007, likewise without waiting for its flush: a mark lost in a crash leaves its rows
-- DELIVERING, sent again after the lease (consumers dedupe by msgx-event-id). Anything durable
-- that depends on it (an ack of the message it delivered) commits after it in the WAL, so a flush
-- of that carries the mark too. In a transaction with the txmsg hooks, the setting covers them.
CREATE OR REPLACE FUNCTION msgx_outbox_mark(p_ids bigint[], p_status text[], p_attempts integer[], p_next timestamptz[],
                                            p_error text[], p_sent_as bigint[], p_now timestamptz, p_me text,
                                            o_ids bigint[], o_publisher text[], o_outcome text[], o_partition integer[],
                                            o_offset bigint[], o_error text[], p_stalled boolean[])
RETURNS TABLE (event_id bigint, status text, source_kind text, source_id text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  IF coalesce(array_length(o_ids, 1), 0) > 0 THEN
    INSERT INTO event_delivery (event_id, publisher, outcome, partition, "offset", at, error)
    SELECT o.id, o.publisher, o.outcome, o.part, o.off, p_now, o.error
    FROM unnest(o_ids, o_publisher, o_outcome, o_partition, o_offset, o_error) AS o(id, publisher, outcome, part, off, error)
    ON CONFLICT (event_id, publisher) DO UPDATE SET
      outcome = EXCLUDED.outcome, partition = EXCLUDED.partition, "offset" = EXCLUDED."offset",
      at = EXCLUDED.at, error = EXCLUDED.error, tries = event_delivery.tries + 1;
  END IF;
  RETURN QUERY
  UPDATE msg_event e SET
    status = u.status,
    attempts = u.attempts,
    next_attempt_at = coalesce(u.next_at, e.next_attempt_at),
    last_error = coalesce(u.error, e.last_error),
    sent_at = CASE WHEN u.status = 'SENT' THEN p_now ELSE e.sent_at END,
    dead_at = CASE WHEN u.status = 'DEAD' THEN p_now ELSE e.dead_at END,
    sent_as = coalesce(u.sent_as, e.sent_as),
    -- A row released unpublished behind a failed head (no error) keeps what it had.
    stalled_since = CASE WHEN u.stalled THEN coalesce(e.stalled_since, p_now)
                         WHEN u.error IS NULL AND u.status = 'PENDING' THEN e.stalled_since
                         ELSE NULL END,
    lock_until = NULL
  FROM unnest(p_ids, p_status, p_attempts, p_next, p_error, p_sent_as, p_stalled)
       AS u(id, status, attempts, next_at, error, sent_as, stalled)
  WHERE e.event_id = u.id AND e.status = 'DELIVERING' AND e.locked_by = p_me
  RETURNING e.event_id, e.status, e.source_kind, e.source_id;
END $$;
