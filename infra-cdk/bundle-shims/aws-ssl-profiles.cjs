'use strict';
// Lambda bundles only: mysql2's named 'Amazon RDS' SSL profile is never used; msgx passes the
// runtime's RDS CA bundle file itself (MSGX_MAILBOX_SSL_CA). Saves 180 kB of certificates.
module.exports = { ca: [] };
