-- Seed parity, third pass.

-- The sender and receiver a request was written as (SNDR and RCVR of its COUTMSGS row): the
-- sender is part of the marker the row is found by, so a request is reconciled under the name it
-- was written with even after MSGX_REQUEST_SENDER changes. Rows before this were all MSGX → FIMS.
ALTER TABLE req_track ADD COLUMN sender text NOT NULL DEFAULT 'MSGX', ADD COLUMN receiver text NOT NULL DEFAULT 'FIMS';

-- The snapshot log is purged by (scope end, receipt): a package goes once both the day it covers
-- and its arrival are past retention.
CREATE INDEX schd_snap_log_scope_received ON schd_snap_log (scope, received_at);
