-- Delivery never stalls in silence. An event held back by an outage of its whole
-- destination (no broker reachable, connection refused) spends no attempt; it records here since
-- when, so /admin/stats, the console and `msgx status` can show the target as stalled, with the
-- reason (last_error) and its age. Cleared by the first outcome that is not an outage.
ALTER TABLE msg_event ADD COLUMN stalled_since timestamptz;

-- The mark of 004 plus p_stalled: true for rows that failed only because the destination was away.
DROP FUNCTION msgx_outbox_mark(bigint[], text[], integer[], timestamptz[], text[], bigint[], timestamptz, text,
                               bigint[], text[], text[], integer[], bigint[], text[]);
CREATE FUNCTION msgx_outbox_mark(p_ids bigint[], p_status text[], p_attempts integer[], p_next timestamptz[],
                                 p_error text[], p_sent_as bigint[], p_now timestamptz, p_me text,
                                 o_ids bigint[], o_publisher text[], o_outcome text[], o_partition integer[],
                                 o_offset bigint[], o_error text[], p_stalled boolean[])
RETURNS TABLE (event_id bigint, status text, source_kind text, source_id text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
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
