-- Where a target's last cursor record landed in the Kafka offsets topic (exactly once, docs/outbox.md
-- "Exactly once into Kafka"), written by the statement that mirrors that cursor after its Kafka
-- transaction committed. A starting dispatcher that finds nothing written to that partition after the
-- record keeps this row's cursor and skips reading the topic back (a consumer group join, ~3 s on MSK).
-- NULL when PostgreSQL's cursor moved without a Kafka commit (then it is not the record's cursor).
ALTER TABLE outbox_target
  ADD COLUMN offsets_topic text,
  ADD COLUMN offsets_partition integer,
  ADD COLUMN offsets_offset bigint,
  ADD COLUMN offsets_partitions integer;

COMMENT ON COLUMN outbox_target.offsets_topic IS 'Exactly once: the offsets topic (MSGX_TOPIC_OFFSETS) the cursor in this row was last committed to; NULL when the cursor moved without a Kafka commit. lib/outbox/logBatch.ts FINISH_SQL.';
COMMENT ON COLUMN outbox_target.offsets_partition IS 'Exactly once: the offsets topic partition holding the record of this row''s cursor.';
COMMENT ON COLUMN outbox_target.offsets_offset IS 'Exactly once: the offset of the record of this row''s cursor; at start, a last stable offset of offsets_offset + 2 (the record, its commit marker) means nothing was written after it and the topic is not read (lib/outbox/exactlyOnce.ts).';
COMMENT ON COLUMN outbox_target.offsets_partitions IS 'Exactly once: the offsets topic''s partition count when the record was written; another count at start means the target''s key may hash elsewhere, and the topic is read.';
