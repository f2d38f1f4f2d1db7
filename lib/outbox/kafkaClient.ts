import kafkajs from 'kafkajs';
import type { KafkaConfig, SASLOptions } from 'kafkajs';
import type { Config } from '../config/config.ts';
import type { Log } from '../observability/logger.ts';

const { Kafka, logLevel } = kafkajs;

export interface KafkaClientOptions {
  /** Client id shown in broker logs. */
  clientId?: string;
  /** Upper bound of one request (and of connecting); the publish deadline in practice. */
  requestTimeoutMs?: number;
  log?: Log;
  /** kafkajs' own retries of connecting and requests (its defaults when absent). */
  retry?: KafkaConfig['retry'];
}

/**
 * One kafkajs client for config.kafka: TLS when MSGX_KAFKA_SSL, MSK IAM (SASL OAUTHBEARER with a
 * token from aws-msk-iam-sasl-signer-js, which implies TLS) when MSGX_KAFKA_IAM_REGION is set.
 */
export function createKafka(kafka: Config['kafka'], options: KafkaClientOptions = {}): InstanceType<typeof Kafka> {
  if (kafka.brokers.length === 0) throw new Error('MSGX_KAFKA_BROKERS is empty: use the file sink instead');
  const requestTimeout = options.requestTimeoutMs ?? 30_000;
  const log = options.log;
  const cfg: KafkaConfig = {
    clientId: options.clientId ?? 'msgx',
    brokers: kafka.brokers,
    ssl: kafka.ssl || !!kafka.iamRegion,
    connectionTimeout: Math.min(requestTimeout, 3000),
    requestTimeout,
    ...(options.retry ? { retry: options.retry } : {}),
    // kafkajs logs every failed connection at ERROR; our own round log says the same once.
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => {
      log?.debug?.({ message: 'kafkajs', kafkaNamespace: entry.namespace, kafkaLog: entry.log.message });
    },
  };
  if (kafka.iamRegion) cfg.sasl = mskIamSasl(kafka.iamRegion);
  return new Kafka(cfg);
}

function mskIamSasl(region: string): SASLOptions {
  return {
    mechanism: 'oauthbearer',
    // A fresh token per authentication: tokens last 15 minutes, connections may live longer
    // (MSK re-authenticates through this provider).
    oauthBearerProvider: async () => {
      const { generateAuthToken } = (await import('aws-msk-iam-sasl-signer-js')) as typeof import('aws-msk-iam-sasl-signer-js');
      const { token } = await generateAuthToken({ region });
      return { value: token };
    },
  };
}
