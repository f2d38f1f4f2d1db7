import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { parseDuration } from '../../lib/config/parse.ts';
import { ConfigError } from '../../lib/shared/errors.ts';

describe('configuration', () => {
  it('runs on embedded defaults with nothing set', () => {
    const c = loadConfig({});
    expect(c.runtime).toBe('twin');
    expect(c.http.port).toBe(8080);
    expect(c.timezone).toBe('Asia/Shanghai');
    expect(c.pipeline).toMatchObject({
      pollIntervalMs: 1000,
      claimBatch: 50,
      maxAttempts: 5,
      backoffInitialMs: 1000,
      backoffMaxMs: 60_000,
      headDeadlineMs: 600_000,
    });
    expect(c.outbox).toMatchObject({
      topicMsg: 'msgx.msg',
      topicSchd: 'msgx.schd',
      topicPartitions: 6,
      maxRetryCount: 10,
      initialBackoffMs: 5000,
      maxBackoffMs: 300_000,
    });
    expect(c.txmsg.redeliveryScheduleMs).toEqual([0, 60_000, 240_000, 600_000, 1_800_000, 3_600_000]);
    expect(c.txmsg.checkMax).toBe(15);
  });

  it.each([
    [{ MSGX_HTTP_PORT: 'eighty' }, /MSGX_HTTP_PORT/],
    [{ MSGX_POLL_INTERVAL_MS: '0' }, /MSGX_POLL_INTERVAL_MS/],
    [{ MSGX_TIMEZONE: 'Mars/Olympus' }, /MSGX_TIMEZONE: must be an IANA time zone/],
    [{ MSGX_MAILBOX_URL: 'postgres://x' }, /MSGX_MAILBOX_URL: must be a mysql:\/\/ URL/],
    [{ MSGX_BACKOFF_INITIAL: '2m', MSGX_BACKOFF_MAX: '1m' }, /MSGX_BACKOFF_INITIAL: must not exceed MSGX_BACKOFF_MAX/],
    [{ MSGX_TX_REDELIVERY_SCHEDULE: '0s,soon' }, /MSGX_TX_REDELIVERY_SCHEDULE: "soon" is not a duration/],
    [{ MSGX_DELIVERY_LEASE: '1s', MSGX_DELIVERY_PUBLISH_TIMEOUT: '3s' }, /MSGX_DELIVERY_LEASE/],
  ])('refuses %o with a message naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  // README "Configuration": every interval and batch size must be positive (a zero poll interval is a busy loop).
  const POSITIVE_DURATIONS = [
    'MSGX_BACKOFF_INITIAL',
    'MSGX_BACKOFF_MAX',
    'MSGX_HEAD_DEADLINE',
    'MSGX_BACKFILL_INITIAL',
    'MSGX_BACKFILL_MAX',
    'MSGX_DELIVERY_PUBLISH_TIMEOUT',
    'MSGX_DELIVERY_INITIAL_BACKOFF',
    'MSGX_DELIVERY_MAX_BACKOFF',
    'MSGX_DELIVERY_LEASE',
    'MSGX_SCHD_FLUSH_PERIOD',
    'MSGX_DELIVERY_POLL_INTERVAL',
    'MSGX_TX_CHECK_INTERVAL',
    'MSGX_TX_RETENTION',
    'MSGX_REQUEST_TIMEOUT',
    'MSGX_HTTP_REQUEST_TIMEOUT',
    'MSGX_STALE_TARGET_AFTER',
  ];
  const POSITIVE_COUNTS = [
    'MSGX_POLL_INTERVAL_MS',
    'MSGX_CLAIM_BATCH',
    'MSGX_GROUP_COMMIT',
    'MSGX_MAX_ATTEMPTS',
    'MSGX_MAX_BODY_BYTES',
    'MSGX_TOPIC_PARTITIONS',
    'MSGX_DELIVERY_BATCH_SIZE',
    'MSGX_DELIVERY_MAX_RETRY_COUNT',
    'MSGX_SCHD_FLUSH_LIMIT',
    'MSGX_TX_CHECK_MAX',
    'MSGX_TX_REDELIVERY_BATCH',
    'MSGX_HISTORY_RETENTION_DAYS',
    'MSGX_PROC_RETENTION_DAYS',
    'MSGX_SNAP_LOG_RETENTION_DAYS',
  ];
  it.each(POSITIVE_DURATIONS.flatMap((v) => ['0s', '0', '0ms'].map((zero) => [v, zero])))(
    'refuses %s=%s: intervals must be positive',
    (name, zero) => {
      expect(() => loadConfig({ [name]: zero })).toThrow(new RegExp(`${name}: "${zero}" must be a positive duration`));
    },
  );
  it.each(POSITIVE_COUNTS.flatMap((v) => ['0', '-1'].map((n) => [v, n])))(
    'refuses %s=%s: counts and batch sizes must be positive',
    (name, n) => {
      expect(() => loadConfig({ [name]: n })).toThrow(new RegExp(`${name}:`));
    },
  );
  it('refuses a zero batch size or interval in a target override', () => {
    expect(() => loadConfig({ MSGX_DELIVERY_TARGET_OVERRIDES: '{"msg":{"batchSize":0}}' })).toThrow(
      /MSGX_DELIVERY_TARGET_OVERRIDES: msg.batchSize/,
    );
    expect(() => loadConfig({ MSGX_DELIVERY_TARGET_OVERRIDES: '{"msg":{"initialBackoff":"0s"}}' })).toThrow(
      /MSGX_DELIVERY_TARGET_OVERRIDES: msg.initialBackoff: must be positive/,
    );
  });
  it('MSGX_GAP_GRACE: 3s by default, 0s means never wait, not longer than the head deadline, a bad value named', () => {
    expect(loadConfig({}).pipeline).toMatchObject({ gapGraceMs: 3000, holeRecheckMs: 600_000 });
    expect(loadConfig({ MSGX_GAP_GRACE: '0s' }).pipeline.gapGraceMs).toBe(0);
    expect(loadConfig({ MSGX_GAP_GRACE: '750ms' }).pipeline.gapGraceMs).toBe(750);
    expect(() => loadConfig({ MSGX_GAP_GRACE: 'soon' })).toThrow(/MSGX_GAP_GRACE: "soon" is not a duration/);
    expect(() => loadConfig({ MSGX_GAP_GRACE: '11m' })).toThrow(/MSGX_GAP_GRACE: must not exceed MSGX_HEAD_DEADLINE/);
  });

  it('keeps the documented zeros: an immediate first redelivery', () => {
    expect(loadConfig({ MSGX_TX_REDELIVERY_SCHEDULE: '0s,1m' }).txmsg.redeliveryScheduleMs).toEqual([0, 60_000]);
    expect(loadConfig({ MSGX_DELIVERY_POLL_INTERVAL: '250ms' }).outbox.pollIntervalMs).toBe(250);
  });

  it('refuses the embedded database in the cloud; Kafka and the mailbox only where bound', () => {
    expect(() => loadConfig({ AWS_LAMBDA_FUNCTION_NAME: 'msgx-pump' })).toThrow(/MSGX_PG_URL: required in the cloud/);
    // The poller is bound to no brokers, the dispatcher and the migrator to no mailbox (docs/deploy.md).
    expect(
      loadConfig({ MSGX_RUNTIME: 'lambda', MSGX_PG_URL: 'postgres://u@db/msgx', MSGX_MAILBOX_URL: 'mysql://u@mb/box' }).kafka.brokers,
    ).toEqual([]);
    expect(
      loadConfig({ MSGX_RUNTIME: 'lambda', MSGX_PG_URL: 'postgres://u@db/msgx', MSGX_KAFKA_BROKERS: 'b1:9098' }).mailboxUrl,
    ).toBeUndefined();
    const ok = loadConfig({
      MSGX_RUNTIME: 'lambda',
      MSGX_PG_URL: 'postgres://u@db/msgx',
      MSGX_MAILBOX_URL: 'mysql://u@mb/box',
      MSGX_KAFKA_BROKERS: 'b1:9098,b2:9098',
    });
    expect(ok.kafka.brokers).toEqual(['b1:9098', 'b2:9098']);
  });

  it.each(['MSGX_KAFKA_ACKS', 'MSGX_KAFKA_IDEMPOTENT', 'MSGX_PRODUCER_MAX_IN_FLIGHT_REQUESTS'])(
    'refuses %s: the producer safety settings cannot be weakened',
    (name) => {
      expect(() => loadConfig({ [name]: '1' })).toThrow(new RegExp(`${name}: the Kafka producer is always idempotent with acks=all`));
    },
  );

  it('MSGX_STAGE names the transactional ids; unset, each offsets topic is its own stage; a dot is refused', () => {
    expect(loadConfig({ MSGX_STAGE: 'prod' }).outbox.stage).toBe('prod');
    expect(loadConfig({ MSGX_STAGE: 'prod', MSGX_SHADOW: '1' }).outbox.stage).toBe('prod');
    // Unset: two twins on one broker with their own offsets topics (or shadow beside live) never share an id.
    expect(loadConfig({}).outbox.stage).toBe('msgx.offsets');
    expect(loadConfig({ MSGX_SHADOW: '1' }).outbox.stage).toBe('msgx.offsets.shadow');
    expect(loadConfig({ MSGX_TOPIC_OFFSETS: 'run-7.offsets' }).outbox.stage).toBe('run-7.offsets');
    for (const bad of ['prod.eu', 'a b', 'x'.repeat(65)])
      expect(() => loadConfig({ MSGX_STAGE: bad }), bad).toThrow(
        /MSGX_STAGE: must be the deployment's name: 1 to 64 letters, digits, "-" or "_" \(no dot/,
      );
  });

  it('MSGX_OUTBOX_RELAY: the claim relay is gone, and a deployment that still asks for it is told so; log is accepted', () => {
    expect(() => loadConfig({ MSGX_OUTBOX_RELAY: 'claim' })).toThrow(ConfigError);
    expect(() => loadConfig({ MSGX_OUTBOX_RELAY: 'claim' })).toThrow(/MSGX_OUTBOX_RELAY: the claim relay was removed/);
    expect(() => loadConfig({ MSGX_OUTBOX_RELAY: 'log' })).not.toThrow();
    expect(loadConfig({ MSGX_OUTBOX_RELAY: 'log', MSGX_KAFKA_BROKERS: 'k:9092' }).outbox.exactlyOnce).toBe(true);
  });

  it('shadow mode publishes to .shadow topics', () => {
    const c = loadConfig({ MSGX_SHADOW: '1' });
    expect([c.shadow, c.outbox.topicMsg, c.outbox.topicSchd]).toEqual([true, 'msgx.msg.shadow', 'msgx.schd.shadow']);
  });

  it('parses durations in ms, s, m and h', () => {
    expect(['500ms', '30s', '4m', '1h', '250'].map(parseDuration)).toEqual([500, 30_000, 240_000, 3_600_000, 250]);
    expect(() => parseDuration('1 day')).toThrow(/not a duration/);
  });
});
