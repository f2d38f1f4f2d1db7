/**
 * Setup file of every fault test file: point the mailbox and Kafka settings at the run's private
 * instances (globalSetup.ts), so freshMysql(), serviceUrls() and the role children use them.
 * PostgreSQL stays the shared one (from .services/env).
 */
import { inject } from 'vitest';

const s = inject('faultServices');
process.env.MSGX_MAILBOX_URL = s.mailboxUrl;
process.env.MSGX_KAFKA_BROKERS = s.kafkaBrokers;
