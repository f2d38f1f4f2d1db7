-- Outbox: events waiting for delivery, in event_id order per target.
CREATE TABLE msg_event (
  event_id         bigserial PRIMARY KEY,
  target           text NOT NULL,                 -- 'msg', 'schd', or 'tx:<topic>'
  partition_key    text,                          -- the Kafka key (FLID for flight events)
  event_type       text NOT NULL,                 -- e.g. FLIGHT_UPDATED, UPSERT, TOMBSTONE, TX_MESSAGE
  value            text,                          -- the record value as sent; NULL is a tombstone
  headers          jsonb NOT NULL DEFAULT '{}'::jsonb,
  flid             text,
  state_version    integer,
  source_kind      text,                          -- 'proc' | 'txmsg' | 'external'
  source_id        text,
  status           text NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'DELIVERING', 'SENT', 'DEAD')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL,
  lock_until       timestamptz,
  locked_by        text,
  last_error       text,
  created_at       timestamptz NOT NULL,
  sent_at          timestamptz
);
CREATE INDEX msg_event_open ON msg_event (target, event_id) WHERE status IN ('PENDING', 'DELIVERING');
CREATE INDEX msg_event_source ON msg_event (source_kind, source_id);
CREATE INDEX msg_event_dead ON msg_event (target, event_id) WHERE status = 'DEAD';
