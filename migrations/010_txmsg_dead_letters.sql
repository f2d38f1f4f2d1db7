-- The dead-letter monitor: each transactional message that dies is logged (and counted) once,
-- naming it, after the transaction that killed it committed. A message resent and dead again is
-- reported again (its updated_at is later than its last report). Those already dead are known.
ALTER TABLE tx_message ADD COLUMN dead_reported_at timestamptz;
UPDATE tx_message SET dead_reported_at = updated_at WHERE status = 'DEAD';
CREATE INDEX tx_message_dead_unreported ON tx_message (updated_at)
  WHERE status = 'DEAD' AND (dead_reported_at IS NULL OR dead_reported_at < updated_at);
