--
-- PostgreSQL database dump
--

--
-- Name: msgx_event_deliveries(text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_event_deliveries(p_target text, p_event_id bigint) RETURNS TABLE(publisher text, sent_at timestamp with time zone, partition integer, "offset" bigint, tries integer)
    LANGUAGE sql STABLE
    AS $$
  SELECT b.publisher, b.sent_at, b.partitions[i.n], b.offsets[i.n], coalesce(b.tries[i.n], 1)
  FROM outbox_batch b
  CROSS JOIN LATERAL (SELECT array_position(b.event_ids, p_event_id) AS n) i
  WHERE int8range(b.lo_id, b.hi_id, '[]') @> p_event_id AND b.target = p_target AND p_event_id = ANY (b.event_ids)
  ORDER BY b.sent_at, b.publisher
$$;

--
-- Name: FUNCTION msgx_event_deliveries(p_target text, p_event_id bigint); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_event_deliveries(p_target text, p_event_id bigint) IS 'The publishers that took the event p_event_id of p_target, from outbox_batch (one row per publisher per finished batch): when, the Kafka partition and offset (NULL for publishers without), and the try it went on. The batch''s id range is only a prefilter (ranges of batches overlap when a transaction commits late); event_ids decides. lib/outbox/sourceEvents.ts.';

--
-- Name: msgx_event_delivery_cascade(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_event_delivery_cascade() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  DELETE FROM event_delivery d USING gone g WHERE d.event_id = g.event_id;
  RETURN NULL;
END $$;

--
-- Name: FUNCTION msgx_event_delivery_cascade(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_event_delivery_cascade() IS 'Trigger (statement level, AFTER DELETE ON msg_event): deletes the event_delivery outcomes of the deleted events (outcomes the per-event relay wrote, kept without a foreign key), as retention removes their events.';

--
-- Name: msgx_event_state(text, text, bigint, xid8, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_event_state(p_status text, p_target text, p_event_id bigint, p_writer xid8, p_now timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN p_status <> 'PENDING' THEN p_status ELSE msgx_outbox_state(p_target, p_event_id, p_writer, p_now) END
$$;

--
-- Name: FUNCTION msgx_event_state(p_status text, p_target text, p_event_id bigint, p_writer xid8, p_now timestamp with time zone); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_event_state(p_status text, p_target text, p_event_id bigint, p_writer xid8, p_now timestamp with time zone) IS 'The event state every reader shows: the stored status where the per-event path settled or leased the row, else msgx_outbox_state. lib/outbox/sourceEvents.ts, lib/outbox/replay.ts, lib/txmsg/store.ts.';

--
-- Name: msgx_outbox_dead(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_outbox_dead() RETURNS TABLE(target text, event_id bigint, attempts integer, last_error text, dead_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
  SELECT m.target, m.event_id, m.attempts, m.last_error, m.dead_at FROM msg_event m WHERE m.status = 'DEAD' AND m.dead_at IS NOT NULL
  UNION ALL
  SELECT x.target, x.event_id, x.attempts, x.last_error, x.updated_at FROM outbox_exception x WHERE x.dead
$$;

--
-- Name: FUNCTION msgx_outbox_dead(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_outbox_dead() IS 'Every dead event: marked DEAD by the per-event path or given up by the log relay (a dead exception), with attempts, last error and when. lib/outbox/queries.ts, lib/outbox/replay.ts.';

--
-- Name: msgx_outbox_open(timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_outbox_open(p_now timestamp with time zone) RETURNS TABLE(target text, event_id bigint, state text, attempts integer, next_attempt_at timestamp with time zone, last_error text, created_at timestamp with time zone, stalled_since timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
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

--
-- Name: FUNCTION msgx_outbox_open(p_now timestamp with time zone); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_outbox_open(p_now timestamp with time zone) IS 'Every open (PENDING or DELIVERING) event, derived set-based: per target the events its cursor has not passed (msg_event_writer from the cursor''s xmin), its exceptions that are not dead, or the per-event path''s open rows; with attempts, next attempt, last error and the target''s stall. lib/outbox/queries.ts, lib/outbox/metrics.ts, lib/outbox/missingTopics.ts, lib/outbox/retention.ts.';

--
-- Name: msgx_outbox_origin(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_outbox_origin() RETURNS pg_snapshot
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT '1:1:'::pg_snapshot $$;

--
-- Name: FUNCTION msgx_outbox_origin(); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_outbox_origin() IS 'The snapshot a new target''s cursor starts at: it sees no transaction, so the first batch holds every event not settled by the per-event path. lib/outbox/logDispatch.ts.';

--
-- Name: msgx_outbox_state(text, bigint, xid8, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.msgx_outbox_state(p_target text, p_event_id bigint, p_writer xid8, p_now timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
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

--
-- Name: FUNCTION msgx_outbox_state(p_target text, p_event_id bigint, p_writer xid8, p_now timestamp with time zone); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.msgx_outbox_state(p_target text, p_event_id bigint, p_writer xid8, p_now timestamp with time zone) IS 'An event''s state for one target, derived from the log: DEAD from its exception, PENDING while it has an exception that is not dead (a failed head or an event waiting behind one of its key), SENT once the target''s cursor passed it, DELIVERING inside the open batch while the target is leased, PENDING otherwise. lib/outbox/commitLog.ts.';

--
-- Name: audit_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    detail jsonb NOT NULL
);

--
-- Name: audit_log_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: audit_log_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.audit_log_id_seq OWNED BY public.audit_log.id;

--
-- Name: backfill_todo; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.backfill_todo (
    msg_id bigint NOT NULL,
    proc_status text NOT NULL,
    proc_note text,
    processed_at timestamp with time zone NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    last_error text
);

--
-- Name: event_delivery; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.event_delivery (
    event_id bigint NOT NULL,
    publisher text NOT NULL,
    outcome text NOT NULL,
    partition integer,
    "offset" bigint,
    tries integer DEFAULT 1 NOT NULL,
    at timestamp with time zone NOT NULL,
    error text,
    CONSTRAINT event_delivery_outcome_check CHECK ((outcome = ANY (ARRAY['ok'::text, 'failed'::text])))
);

--
-- Name: flight_belt; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_belt (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    beg text,
    "end" text,
    beg_at timestamp with time zone,
    end_at timestamp with time zone,
    item jsonb NOT NULL
);

--
-- Name: flight_brdg; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_brdg (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    beg text,
    "end" text,
    beg_at timestamp with time zone,
    end_at timestamp with time zone,
    item jsonb NOT NULL
);

--
-- Name: flight_chkc; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_chkc (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    beg text,
    "end" text,
    beg_at timestamp with time zone,
    end_at timestamp with time zone,
    item jsonb NOT NULL
);

--
-- Name: flight_csfl; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_csfl (
    flid text NOT NULL,
    awcd text NOT NULL,
    flno text NOT NULL,
    ord integer NOT NULL,
    item jsonb NOT NULL
);

--
-- Name: flight_dlay; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_dlay (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    min text,
    item jsonb NOT NULL
);

--
-- Name: flight_gate; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_gate (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    beg text,
    "end" text,
    beg_at timestamp with time zone,
    end_at timestamp with time zone,
    item jsonb NOT NULL
);

--
-- Name: flight_hst; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_hst (
    id bigint NOT NULL,
    flid text NOT NULL,
    operation_day text NOT NULL,
    state_version integer NOT NULL,
    status text NOT NULL,
    state jsonb NOT NULL,
    last_msg_id bigint,
    updated_at timestamp with time zone NOT NULL,
    archived_at timestamp with time zone NOT NULL
);

--
-- Name: flight_hst_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.flight_hst_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: flight_hst_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.flight_hst_id_seq OWNED BY public.flight_hst.id;

--
-- Name: flight_lnge; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_lnge (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    beg text,
    "end" text,
    beg_at timestamp with time zone,
    end_at timestamp with time zone,
    item jsonb NOT NULL
);

--
-- Name: flight_rout; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_rout (
    flid text NOT NULL,
    seq text NOT NULL,
    ord integer NOT NULL,
    apcd text,
    item jsonb NOT NULL,
    kind text NOT NULL,
    CONSTRAINT flight_rout_kind_check CHECK ((kind = ANY (ARRAY['ROUT'::text, 'ERUT'::text])))
);

--
-- Name: flight_schd; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_schd (
    flid text NOT NULL,
    operation_day text NOT NULL,
    awcd text,
    flno text,
    fltk text,
    adid text,
    actp text,
    acno text,
    term text,
    stat text,
    canx text,
    divt text,
    retn text,
    sobt text,
    sobt_at timestamp with time zone,
    sibt text,
    sibt_at timestamp with time zone,
    eobt text,
    eobt_at timestamp with time zone,
    eibt text,
    eibt_at timestamp with time zone,
    etot text,
    etot_at timestamp with time zone,
    atot text,
    atot_at timestamp with time zone,
    eldt text,
    eldt_at timestamp with time zone,
    aldt text,
    aldt_at timestamp with time zone,
    aibt text,
    aibt_at timestamp with time zone,
    aobt text,
    aobt_at timestamp with time zone,
    bord text,
    bord_at timestamp with time zone,
    gtcl text,
    gtcl_at timestamp with time zone,
    extra jsonb DEFAULT '[]'::jsonb NOT NULL,
    status text DEFAULT 'ACTIVE'::text NOT NULL,
    state_version integer NOT NULL,
    last_msg_id bigint,
    src_dttm timestamp with time zone,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT flight_schd_operation_day_check CHECK ((operation_day ~ '^[0-9]{8}$'::text)),
    CONSTRAINT flight_schd_state_version_check CHECK ((state_version >= 1)),
    CONSTRAINT flight_schd_status_check CHECK ((status = ANY (ARRAY['ACTIVE'::text, 'DELETED'::text])))
);

--
-- Name: flight_stnd; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.flight_stnd (
    flid text NOT NULL,
    code text NOT NULL,
    ord integer NOT NULL,
    beg text,
    "end" text,
    beg_at timestamp with time zone,
    end_at timestamp with time zone,
    item jsonb NOT NULL
);

--
-- Name: mailbox_gap; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mailbox_gap (
    lo bigint NOT NULL,
    hi bigint NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    hole_at timestamp with time zone,
    CONSTRAINT mailbox_gap_check CHECK ((hi >= lo))
);

--
-- Name: mailbox_late; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.mailbox_late (
    msg_id bigint NOT NULL,
    found_at timestamp with time zone NOT NULL,
    via text NOT NULL,
    CONSTRAINT mailbox_late_via_check CHECK ((via = ANY (ARRAY['poller'::text, 'rescan'::text])))
);

--
-- Name: msg_event; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.msg_event (
    event_id bigint NOT NULL,
    target text NOT NULL,
    partition_key text,
    event_type text NOT NULL,
    value text,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    flid text,
    state_version integer,
    source_kind text DEFAULT 'external'::text,
    source_id text,
    status text DEFAULT 'PENDING'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    lock_until timestamp with time zone,
    locked_by text,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    sent_as bigint,
    dead_at timestamp with time zone,
    stalled_since timestamp with time zone,
    writer_xid xid8 DEFAULT pg_current_xact_id(),
    CONSTRAINT msg_event_dead_at_set CHECK (((status <> 'DEAD'::text) OR (dead_at IS NOT NULL))),
    CONSTRAINT msg_event_open_unsettled CHECK (((status <> ALL (ARRAY['PENDING'::text, 'DELIVERING'::text])) OR ((sent_at IS NULL) AND (dead_at IS NULL)))),
    CONSTRAINT msg_event_status_check CHECK ((status = ANY (ARRAY['PENDING'::text, 'DELIVERING'::text, 'SENT'::text, 'DEAD'::text])))
);

--
-- Name: msg_event_event_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.msg_event_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: msg_event_event_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.msg_event_event_id_seq OWNED BY public.msg_event.event_id;

--
-- Name: msgx_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.msgx_migrations (
    id integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: msgx_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.msgx_state (
    key text NOT NULL,
    value jsonb NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: outbox_batch; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_batch (
    target text NOT NULL,
    publisher text NOT NULL,
    sent_at timestamp with time zone NOT NULL,
    lo_id bigint NOT NULL,
    hi_id bigint NOT NULL,
    event_ids bigint[] NOT NULL,
    partitions integer[],
    offsets bigint[],
    tries integer[],
    CONSTRAINT outbox_batch_check CHECK ((lo_id <= hi_id))
);

--
-- Name: TABLE outbox_batch; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.outbox_batch IS 'The log relay''s outcome per publisher per finished batch (lib/outbox/batchLog.ts, written in the batch''s finish statement); read through msgx_event_deliveries; removed by retention with the events below its cut.';

--
-- Name: outbox_exception; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_exception (
    target text NOT NULL,
    event_id bigint NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    last_error text,
    dead boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_to text[] DEFAULT '{}'::text[] NOT NULL,
    partition_key text,
    at_head boolean DEFAULT false NOT NULL
);

--
-- Name: outbox_target; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outbox_target (
    target text NOT NULL,
    last_flush_at timestamp with time zone,
    snap_lo pg_snapshot,
    snap_hi pg_snapshot,
    after_id bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_until timestamp with time zone,
    updated_at timestamp with time zone,
    hold_until timestamp with time zone,
    stalled_since timestamp with time zone,
    last_error text,
    offsets_topic text,
    offsets_partition integer,
    offsets_offset bigint,
    offsets_partitions integer
);

--
-- Name: COLUMN outbox_target.offsets_topic; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.outbox_target.offsets_topic IS 'Exactly once: the offsets topic (MSGX_TOPIC_OFFSETS) the cursor in this row was last committed to; NULL when the cursor moved without a Kafka commit. lib/outbox/logBatch.ts FINISH_SQL.';

--
-- Name: COLUMN outbox_target.offsets_partition; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.outbox_target.offsets_partition IS 'Exactly once: the offsets topic partition holding the record of this row''s cursor.';

--
-- Name: COLUMN outbox_target.offsets_offset; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.outbox_target.offsets_offset IS 'Exactly once: the offset of the record of this row''s cursor; at start, a last stable offset of offsets_offset + 2 (the record, its commit marker) means nothing was written after it and the topic is not read (lib/outbox/exactlyOnce.ts).';

--
-- Name: COLUMN outbox_target.offsets_partitions; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.outbox_target.offsets_partitions IS 'Exactly once: the offsets topic''s partition count when the record was written; another count at start means the target''s key may hash elsewhere, and the topic is read.';

--
-- Name: proc_attempt; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proc_attempt (
    id bigint NOT NULL,
    msg_id bigint NOT NULL,
    attempt integer NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    outcome text NOT NULL,
    error_class text,
    error_detail text
);

--
-- Name: proc_attempt_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.proc_attempt_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: proc_attempt_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.proc_attempt_id_seq OWNED BY public.proc_attempt.id;

--
-- Name: proc_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proc_state (
    msg_id bigint NOT NULL,
    status text DEFAULT 'PENDING'::text NOT NULL,
    identity_key text,
    msg_type text,
    msg_subtype text,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    first_attempt_at timestamp with time zone,
    error_class text,
    error_detail text,
    note text,
    raw_text text,
    received_at timestamp with time zone,
    enqueued_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT proc_state_error_class_check CHECK ((error_class = ANY (ARRAY['MALFORMED'::text, 'PROTOCOL'::text, 'CODEC_ERROR'::text, 'UNSUPPORTED'::text, 'INFRA'::text, 'EXHAUSTED'::text]))),
    CONSTRAINT proc_state_status_check CHECK ((status = ANY (ARRAY['PENDING'::text, 'FAILED'::text, 'SUCCEEDED'::text, 'SKIPPED'::text, 'DEAD'::text])))
);

--
-- Name: proc_state_hst; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proc_state_hst (
    msg_id bigint NOT NULL,
    status text DEFAULT 'PENDING'::text NOT NULL,
    identity_key text,
    msg_type text,
    msg_subtype text,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    first_attempt_at timestamp with time zone,
    error_class text,
    error_detail text,
    note text,
    raw_text text,
    received_at timestamp with time zone,
    enqueued_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    archived_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT proc_state_error_class_check CHECK ((error_class = ANY (ARRAY['MALFORMED'::text, 'PROTOCOL'::text, 'CODEC_ERROR'::text, 'UNSUPPORTED'::text, 'INFRA'::text, 'EXHAUSTED'::text]))),
    CONSTRAINT proc_state_status_check CHECK ((status = ANY (ARRAY['PENDING'::text, 'FAILED'::text, 'SUCCEEDED'::text, 'SKIPPED'::text, 'DEAD'::text])))
);

--
-- Name: ref_master; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ref_master (
    rtype text NOT NULL,
    rkey text NOT NULL,
    payload jsonb NOT NULL,
    version integer NOT NULL,
    msg_id bigint,
    updated_at timestamp with time zone NOT NULL
);

--
-- Name: req_track; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.req_track (
    id bigint NOT NULL,
    kind text NOT NULL,
    scope text NOT NULL,
    status text NOT NULL,
    registered_at timestamp with time zone NOT NULL,
    sent_at timestamp with time zone,
    outbound_id bigint,
    closed_at timestamp with time zone,
    close_reason text,
    resp_msg_id bigint,
    audit jsonb DEFAULT '[]'::jsonb NOT NULL,
    sender text DEFAULT 'MSGX'::text NOT NULL,
    receiver text DEFAULT 'FIMS'::text NOT NULL,
    CONSTRAINT req_track_status_check CHECK ((status = ANY (ARRAY['REGISTERED'::text, 'SENT'::text, 'DONE'::text, 'EXPIRED'::text])))
);

--
-- Name: req_track_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.req_track_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: req_track_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.req_track_id_seq OWNED BY public.req_track.id;

--
-- Name: schd_snap_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schd_snap_log (
    id bigint NOT NULL,
    msg_id bigint NOT NULL,
    styp text NOT NULL,
    scope text,
    dttm timestamp with time zone,
    received_at timestamp with time zone NOT NULL,
    declared integer,
    flights integer NOT NULL,
    created integer NOT NULL,
    updated integer NOT NULL,
    unchanged integer NOT NULL,
    stale integer NOT NULL,
    request_id bigint
);

--
-- Name: schd_snap_log_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.schd_snap_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: schd_snap_log_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.schd_snap_log_id_seq OWNED BY public.schd_snap_log.id;

--
-- Name: tx_idempotency; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tx_idempotency (
    idem_key text NOT NULL,
    tx_id text NOT NULL,
    request_hash text NOT NULL,
    created_at timestamp with time zone NOT NULL
);

--
-- Name: tx_message; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tx_message (
    id text NOT NULL,
    topic text NOT NULL,
    msg_key text,
    payload text NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    check_url text NOT NULL,
    check_after_ms integer NOT NULL,
    check_timeout_ms integer NOT NULL,
    status text NOT NULL,
    checks integer DEFAULT 0 NOT NULL,
    next_check_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    in_flight_event_id bigint,
    redeliver_after_ms integer,
    next_delivery_at timestamp with time zone,
    dead_phase text,
    dead_reason text,
    last_error text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    committed_at timestamp with time zone,
    delivered_at timestamp with time zone,
    finished_at timestamp with time zone,
    biz_name text,
    created_by text,
    resent_by text,
    resent_at timestamp with time zone,
    dead_reported_at timestamp with time zone,
    CONSTRAINT tx_message_dead_phase_check CHECK ((dead_phase = ANY (ARRAY['check'::text, 'delivery'::text]))),
    CONSTRAINT tx_message_status_check CHECK ((status = ANY (ARRAY['PREPARED'::text, 'COMMITTED'::text, 'DELIVERED'::text, 'CONSUMED'::text, 'ROLLED_BACK'::text, 'DEAD'::text])))
);

--
-- Name: tx_message_hst; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tx_message_hst (
    id text NOT NULL,
    topic text NOT NULL,
    msg_key text,
    payload text NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    check_url text NOT NULL,
    check_after_ms integer NOT NULL,
    check_timeout_ms integer NOT NULL,
    status text NOT NULL,
    checks integer DEFAULT 0 NOT NULL,
    next_check_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    in_flight_event_id bigint,
    redeliver_after_ms integer,
    next_delivery_at timestamp with time zone,
    dead_phase text,
    dead_reason text,
    last_error text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    committed_at timestamp with time zone,
    delivered_at timestamp with time zone,
    finished_at timestamp with time zone,
    archived_at timestamp with time zone NOT NULL,
    biz_name text,
    created_by text,
    resent_by text,
    resent_at timestamp with time zone,
    CONSTRAINT tx_message_dead_phase_check CHECK ((dead_phase = ANY (ARRAY['check'::text, 'delivery'::text]))),
    CONSTRAINT tx_message_status_check CHECK ((status = ANY (ARRAY['PREPARED'::text, 'COMMITTED'::text, 'DELIVERED'::text, 'CONSUMED'::text, 'ROLLED_BACK'::text, 'DEAD'::text])))
);

--
-- Name: tx_message_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tx_message_log (
    seq bigint NOT NULL,
    tx_id text NOT NULL,
    at timestamp with time zone NOT NULL,
    kind text NOT NULL,
    status text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL
);

--
-- Name: tx_message_log_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.tx_message_log_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: tx_message_log_seq_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.tx_message_log_seq_seq OWNED BY public.tx_message_log.seq;

--
-- Name: audit_log id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log ALTER COLUMN id SET DEFAULT nextval('public.audit_log_id_seq'::regclass);

--
-- Name: flight_hst id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_hst ALTER COLUMN id SET DEFAULT nextval('public.flight_hst_id_seq'::regclass);

--
-- Name: msg_event event_id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.msg_event ALTER COLUMN event_id SET DEFAULT nextval('public.msg_event_event_id_seq'::regclass);

--
-- Name: proc_attempt id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proc_attempt ALTER COLUMN id SET DEFAULT nextval('public.proc_attempt_id_seq'::regclass);

--
-- Name: req_track id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.req_track ALTER COLUMN id SET DEFAULT nextval('public.req_track_id_seq'::regclass);

--
-- Name: schd_snap_log id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schd_snap_log ALTER COLUMN id SET DEFAULT nextval('public.schd_snap_log_id_seq'::regclass);

--
-- Name: tx_message_log seq; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tx_message_log ALTER COLUMN seq SET DEFAULT nextval('public.tx_message_log_seq_seq'::regclass);

--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

--
-- Name: backfill_todo backfill_todo_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.backfill_todo
    ADD CONSTRAINT backfill_todo_pkey PRIMARY KEY (msg_id);

--
-- Name: event_delivery event_delivery_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.event_delivery
    ADD CONSTRAINT event_delivery_pkey PRIMARY KEY (event_id, publisher);

--
-- Name: flight_belt flight_belt_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_belt
    ADD CONSTRAINT flight_belt_pkey PRIMARY KEY (flid, code);

--
-- Name: flight_brdg flight_brdg_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_brdg
    ADD CONSTRAINT flight_brdg_pkey PRIMARY KEY (flid, code);

--
-- Name: flight_chkc flight_chkc_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_chkc
    ADD CONSTRAINT flight_chkc_pkey PRIMARY KEY (flid, code);

--
-- Name: flight_csfl flight_csfl_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_csfl
    ADD CONSTRAINT flight_csfl_pkey PRIMARY KEY (flid, awcd, flno);

--
-- Name: flight_dlay flight_dlay_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_dlay
    ADD CONSTRAINT flight_dlay_pkey PRIMARY KEY (flid, code);

--
-- Name: flight_gate flight_gate_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_gate
    ADD CONSTRAINT flight_gate_pkey PRIMARY KEY (flid, code);

--
-- Name: flight_hst flight_hst_flid_operation_day_state_version_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_hst
    ADD CONSTRAINT flight_hst_flid_operation_day_state_version_key UNIQUE (flid, operation_day, state_version);

--
-- Name: flight_hst flight_hst_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_hst
    ADD CONSTRAINT flight_hst_pkey PRIMARY KEY (id);

--
-- Name: flight_lnge flight_lnge_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_lnge
    ADD CONSTRAINT flight_lnge_pkey PRIMARY KEY (flid, code);

--
-- Name: flight_rout flight_rout_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_rout
    ADD CONSTRAINT flight_rout_pkey PRIMARY KEY (flid, kind, seq);

--
-- Name: flight_schd flight_schd_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_schd
    ADD CONSTRAINT flight_schd_pkey PRIMARY KEY (flid);

--
-- Name: flight_stnd flight_stnd_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.flight_stnd
    ADD CONSTRAINT flight_stnd_pkey PRIMARY KEY (flid, code);

--
-- Name: mailbox_gap mailbox_gap_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mailbox_gap
    ADD CONSTRAINT mailbox_gap_pkey PRIMARY KEY (lo);

--
-- Name: mailbox_late mailbox_late_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.mailbox_late
    ADD CONSTRAINT mailbox_late_pkey PRIMARY KEY (msg_id);

--
-- Name: msg_event msg_event_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.msg_event
    ADD CONSTRAINT msg_event_pkey PRIMARY KEY (event_id);

--
-- Name: msgx_migrations msgx_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.msgx_migrations
    ADD CONSTRAINT msgx_migrations_pkey PRIMARY KEY (id);

--
-- Name: msgx_state msgx_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.msgx_state
    ADD CONSTRAINT msgx_state_pkey PRIMARY KEY (key);

--
-- Name: outbox_exception outbox_exception_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_exception
    ADD CONSTRAINT outbox_exception_pkey PRIMARY KEY (target, event_id);

--
-- Name: outbox_target outbox_target_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outbox_target
    ADD CONSTRAINT outbox_target_pkey PRIMARY KEY (target);

--
-- Name: proc_attempt proc_attempt_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proc_attempt
    ADD CONSTRAINT proc_attempt_pkey PRIMARY KEY (id);

--
-- Name: proc_state_hst proc_state_hst_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proc_state_hst
    ADD CONSTRAINT proc_state_hst_pkey PRIMARY KEY (msg_id);

--
-- Name: proc_state proc_state_identity_key_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proc_state
    ADD CONSTRAINT proc_state_identity_key_key UNIQUE (identity_key);

--
-- Name: proc_state proc_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proc_state
    ADD CONSTRAINT proc_state_pkey PRIMARY KEY (msg_id);

--
-- Name: ref_master ref_master_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ref_master
    ADD CONSTRAINT ref_master_pkey PRIMARY KEY (rtype, rkey);

--
-- Name: req_track req_track_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.req_track
    ADD CONSTRAINT req_track_pkey PRIMARY KEY (id);

--
-- Name: schd_snap_log schd_snap_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schd_snap_log
    ADD CONSTRAINT schd_snap_log_pkey PRIMARY KEY (id);

--
-- Name: tx_idempotency tx_idempotency_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tx_idempotency
    ADD CONSTRAINT tx_idempotency_pkey PRIMARY KEY (idem_key);

--
-- Name: tx_message_hst tx_message_hst_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tx_message_hst
    ADD CONSTRAINT tx_message_hst_pkey PRIMARY KEY (id);

--
-- Name: tx_message_log tx_message_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tx_message_log
    ADD CONSTRAINT tx_message_log_pkey PRIMARY KEY (seq);

--
-- Name: tx_message tx_message_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tx_message
    ADD CONSTRAINT tx_message_pkey PRIMARY KEY (id);

--
-- Name: backfill_todo_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX backfill_todo_due ON public.backfill_todo USING btree (next_attempt_at);

--
-- Name: flight_schd_day; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX flight_schd_day ON public.flight_schd USING btree (operation_day, flid);

--
-- Name: flight_schd_updated; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX flight_schd_updated ON public.flight_schd USING btree (updated_at);

--
-- Name: mailbox_gap_hole; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX mailbox_gap_hole ON public.mailbox_gap USING btree (hole_at) WHERE (hole_at IS NOT NULL);

--
-- Name: msg_event_dead; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX msg_event_dead ON public.msg_event USING btree (target, event_id) WHERE (dead_at IS NOT NULL);

--
-- Name: msg_event_leased; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX msg_event_leased ON public.msg_event USING btree (target, event_id) WHERE ((status = 'DELIVERING'::text) AND (sent_at IS NULL) AND (dead_at IS NULL));

--
-- Name: msg_event_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX msg_event_open ON public.msg_event USING btree (target, event_id) WHERE ((sent_at IS NULL) AND (dead_at IS NULL));

--
-- Name: msg_event_source; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX msg_event_source ON public.msg_event USING btree (source_kind, source_id);

--
-- Name: msg_event_writer; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX msg_event_writer ON public.msg_event USING btree (writer_xid, target);

--
-- Name: outbox_batch_ids; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_batch_ids ON public.outbox_batch USING gist (int8range(lo_id, hi_id, '[]'::text));

--
-- Name: outbox_exception_dead; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_exception_dead ON public.outbox_exception USING btree (target, event_id) WHERE dead;

--
-- Name: outbox_exception_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outbox_exception_open ON public.outbox_exception USING btree (target, event_id) WHERE (NOT dead);

--
-- Name: proc_attempt_msg; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proc_attempt_msg ON public.proc_attempt USING btree (msg_id, id);

--
-- Name: proc_state_dead; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proc_state_dead ON public.proc_state USING btree (error_class, msg_id) WHERE (status = ANY (ARRAY['DEAD'::text, 'FAILED'::text]));

--
-- Name: proc_state_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proc_state_finished ON public.proc_state USING btree (finished_at) WHERE (finished_at IS NOT NULL);

--
-- Name: proc_state_hst_identity; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX proc_state_hst_identity ON public.proc_state_hst USING btree (identity_key);

--
-- Name: proc_state_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proc_state_open ON public.proc_state USING btree (msg_id) WHERE (status = ANY (ARRAY['PENDING'::text, 'FAILED'::text]));

--
-- Name: req_track_one_open; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX req_track_one_open ON public.req_track USING btree (kind) WHERE (status = ANY (ARRAY['REGISTERED'::text, 'SENT'::text]));

--
-- Name: schd_snap_log_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX schd_snap_log_received ON public.schd_snap_log USING btree (received_at);

--
-- Name: schd_snap_log_scope_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX schd_snap_log_scope_received ON public.schd_snap_log USING btree (scope, received_at);

--
-- Name: tx_message_check_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tx_message_check_due ON public.tx_message USING btree (next_check_at) WHERE (status = 'PREPARED'::text);

--
-- Name: tx_message_dead; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tx_message_dead ON public.tx_message USING btree (id) WHERE (status = 'DEAD'::text);

--
-- Name: tx_message_dead_unreported; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tx_message_dead_unreported ON public.tx_message USING btree (updated_at) WHERE ((status = 'DEAD'::text) AND ((dead_reported_at IS NULL) OR (dead_reported_at < updated_at)));

--
-- Name: tx_message_delivery_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tx_message_delivery_due ON public.tx_message USING btree (attempts DESC, next_delivery_at) WHERE (status = ANY (ARRAY['COMMITTED'::text, 'DELIVERED'::text]));

--
-- Name: tx_message_finished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tx_message_finished ON public.tx_message USING btree (finished_at) WHERE (status = ANY (ARRAY['CONSUMED'::text, 'ROLLED_BACK'::text]));

--
-- Name: tx_message_log_tx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX tx_message_log_tx ON public.tx_message_log USING btree (tx_id, seq);

--
-- Name: msg_event msg_event_delivery_cascade; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER msg_event_delivery_cascade AFTER DELETE ON public.msg_event REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.msgx_event_delivery_cascade();

--
-- PostgreSQL database dump complete
--
