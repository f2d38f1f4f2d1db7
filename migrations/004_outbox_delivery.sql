-- Outbox relay bookkeeping (issue 4): per-publisher outcomes, per-target flush cursor, and which
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
