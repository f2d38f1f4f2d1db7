-- Where each event went, per publisher (docs/outbox.md "Trace and history"): the log relay writes no
-- row per event, so the outcome of a batch is one row per publisher that took events in it, written
-- by the statement that finishes the batch. Parallel arrays, in the order the publisher took them:
-- event_ids; partitions and offsets (Kafka; NULL for a publisher that has none); tries (NULL when
-- every event went on its first try).
CREATE TABLE outbox_batch (
  target text NOT NULL,
  publisher text NOT NULL,
  sent_at timestamptz NOT NULL,
  -- min and max of event_ids. A batch is what committed between two snapshots, so the ranges of
  -- consecutive batches overlap when a transaction commits late: the range only narrows the search,
  -- event_ids decides.
  lo_id bigint NOT NULL,
  hi_id bigint NOT NULL,
  event_ids bigint[] NOT NULL,
  partitions integer[],
  offsets bigint[],
  tries integer[],
  CHECK (lo_id <= hi_id)
);
-- One entry per batch row (not one per event, as a GIN on event_ids would be): the batches whose
-- range holds an event, for the trace, and those wholly below a cut, for retention.
CREATE INDEX outbox_batch_ids ON outbox_batch USING gist (int8range(lo_id, hi_id, '[]'));

-- The publishers that took an event: one row per batch (or retried head) that held it.
CREATE FUNCTION msgx_event_deliveries(p_target text, p_event_id bigint)
RETURNS TABLE (publisher text, sent_at timestamptz, partition integer, "offset" bigint, tries integer)
LANGUAGE sql STABLE AS $$
  SELECT b.publisher, b.sent_at, b.partitions[i.n], b.offsets[i.n], coalesce(b.tries[i.n], 1)
  FROM outbox_batch b
  CROSS JOIN LATERAL (SELECT array_position(b.event_ids, p_event_id) AS n) i
  WHERE int8range(b.lo_id, b.hi_id, '[]') @> p_event_id AND b.target = p_target AND p_event_id = ANY (b.event_ids)
  ORDER BY b.sent_at, b.publisher
$$;
COMMENT ON FUNCTION msgx_event_deliveries(text, bigint) IS
  'The publishers that took the event p_event_id of p_target, from outbox_batch (one row per publisher per finished batch): when, the Kafka partition and offset (NULL for publishers without), and the try it went on. The batch''s id range is only a prefilter (ranges of batches overlap when a transaction commits late); event_ids decides. lib/outbox/sourceEvents.ts.';
COMMENT ON TABLE outbox_batch IS
  'The log relay''s outcome per publisher per finished batch (lib/outbox/batchLog.ts, written in the batch''s finish statement); read through msgx_event_deliveries; removed by retention with the events below its cut.';
