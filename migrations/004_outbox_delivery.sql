-- Outbox relay bookkeeping: per-publisher outcomes, per-target flush cursor, and which
-- event a schd version was sent as. msg_event itself stays as 002 made it, plus two columns.

-- The outcome of the latest attempt of each publisher for each event. An event is SENT only when
-- every publisher of its target has an 'ok' row; a retry skips publishers that already took it.
CREATE TABLE event_delivery (
  event_id   bigint NOT NULL REFERENCES msg_event (event_id) ON DELETE CASCADE,
  publisher  text NOT NULL,                      -- Publisher.name, e.g. kafka, webhook:https://…
  outcome    text NOT NULL CHECK (outcome IN ('ok', 'failed')),
  partition  integer,                            -- Kafka partition, when known
  "offset"   bigint,                             -- Kafka offset, when known
  tries      integer NOT NULL DEFAULT 1,
  at         timestamptz NOT NULL,
  error      text,
  PRIMARY KEY (event_id, publisher)
);

-- One row per target that needs state between rounds: the schd flush period counts from here.
CREATE TABLE outbox_target (
  target         text PRIMARY KEY,
  last_flush_at  timestamptz
);

-- schd aggregation: an older version marked SENT (or DEAD) with the newest one names it here.
ALTER TABLE msg_event ADD COLUMN sent_as bigint;
-- When the event went DEAD (for the dead list and replay audit); NULL otherwise.
ALTER TABLE msg_event ADD COLUMN dead_at timestamptz;

-- The claim and the mark of a batch as functions: one round trip each, and their plans are cached
-- per session (planning the mark statement cost more than running it). The dispatcher's
-- ordering argument is in lib/outbox/dispatcher.ts.

-- Claims the head run of an ordinary target (see CLAIM in dispatcher.ts). The advisory lock comes
-- first; because this function is VOLATILE, the claim statement after it takes a fresh snapshot
-- and sees every claim that committed before we got the lock. Returns no rows and locked = true
-- when another dispatcher is claiming from this target right now. p_after > 0 claims the run that
-- follows a batch the caller already holds (pipelining): the rows up to p_after are its own lease.
CREATE FUNCTION msgx_outbox_claim(p_target text, p_limit integer, p_now timestamptz, p_lock_until timestamptz, p_me text,
                                  p_after bigint)
RETURNS TABLE (locked boolean, event_id bigint, partition_key text, event_type text, value text, headers jsonb,
               attempts integer, source_kind text, source_id text, delivered_to text[])
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('msgx:target:' || p_target)) THEN
    RETURN QUERY SELECT true, NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::integer, NULL::text, NULL::text, NULL::text[];
    RETURN;
  END IF;
  RETURN QUERY
  WITH open AS (
    SELECT m.event_id, m.attempts, m.status, m.lock_until, m.next_attempt_at FROM msg_event m
    WHERE m.target = p_target AND m.status IN ('PENDING', 'DELIVERING') AND m.event_id > p_after
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

-- Records a batch: every row's new state (only rows still leased by p_me) and every publisher
-- outcome; returns the rows it changed.
CREATE FUNCTION msgx_outbox_mark(p_ids bigint[], p_status text[], p_attempts integer[], p_next timestamptz[],
                                 p_error text[], p_sent_as bigint[], p_now timestamptz, p_me text,
                                 o_ids bigint[], o_publisher text[], o_outcome text[], o_partition integer[],
                                 o_offset bigint[], o_error text[])
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
    lock_until = NULL
  FROM unnest(p_ids, p_status, p_attempts, p_next, p_error, p_sent_as) AS u(id, status, attempts, next_at, error, sent_as)
  WHERE e.event_id = u.id AND e.status = 'DELIVERING' AND e.locked_by = p_me
  RETURNING e.event_id, e.status, e.source_kind, e.source_id;
END $$;
