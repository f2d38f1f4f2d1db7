import { Duration, Stack, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subs from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { METRIC_NAMESPACE, METRIC_SERVICE, METRICS } from '../../lib/constants.ts';
import { ROLE_CATALOGUE } from '../../lib/app/catalogue.ts';
import { type FunctionRole, type MsgxSettings, SCHEDULED_ROLES } from '../config.ts';
import type { DataStack } from './data-stack.ts';
import type { MessagingStack } from './messaging-stack.ts';
import { disabledRoles, type ServiceStack } from './service-stack.ts';

export interface MonitoringStackProps extends StackProps {
  msgx: MsgxSettings;
  service: ServiceStack;
  data: DataStack;
  messaging: MessagingStack;
}

/**
 * Contract with the functions: custom metrics are CloudWatch EMF in namespace `msgx` with the
 * Powertools default dimension `service=msgx` (POWERTOOLS_SERVICE_NAME), plus `kind` on DeadCount.
 * An alarm matches a metric only when the dimension set is exactly this one.
 */
export { METRIC_NAMESPACE };
export const SERVICE_DIMENSION = { service: METRIC_SERVICE } as const;
export const DEAD_KINDS = ['proc', 'event', 'txmsg'] as const;
/** Emitted by every scheduled invocation (lib/jobs/roleMetrics.ts) with the dimension `role`. */
export const HEARTBEAT_METRIC = METRICS.heartbeat;
export const LOCK_TAKEN_METRIC = METRICS.roleLockTaken;
/** Gauge from the sweep: mailbox back-fills that failed at least once and are still owed. */
export const BACKFILL_FAILURE_METRIC = METRICS.backfillFailures;
export const STALLED_TARGETS_METRIC = METRICS.stalledTargets;
export const OUTBOX_BACKLOG_METRIC = METRICS.outboxBacklog;

interface AlarmOptions {
  missing?: cloudwatch.TreatMissingData;
  comparison?: cloudwatch.ComparisonOperator;
  /** Consecutive one-minute datapoints; 1 for metrics that already sum a window. */
  periods?: number;
}

const PERIOD = Duration.minutes(1);

/** A msgx custom metric with the contract's dimensions. */
function custom(metricName: string, extra: Record<string, string> = {}, period = PERIOD, statistic: string = cloudwatch.Stats.MAXIMUM) {
  return new cloudwatch.Metric({
    namespace: METRIC_NAMESPACE,
    metricName,
    dimensionsMap: { ...SERVICE_DIMENSION, ...extra },
    statistic,
    period,
  });
}

/** An AWS service metric with its dimensions. */
function awsMetric(namespace: string, metricName: string, dimensionsMap: Record<string, string>, statistic: string, period = PERIOD) {
  return new cloudwatch.Metric({ namespace, metricName, dimensionsMap, statistic, period });
}

/**
 * The stage's alarms, all sent to one encrypted SNS topic, and its dashboard. Each group of
 * alarms is one method; docs/deploy.md has the runbook for each alarm.
 */
export class MonitoringStack extends Stack {
  readonly topic: sns.Topic;
  readonly alarms: cloudwatch.Alarm[] = [];
  readonly dashboard: cloudwatch.Dashboard;
  private readonly msgx: MsgxSettings;
  private readonly action: cwActions.SnsAction;

  constructor(scope: Construct, id: string, props: MonitoringStackProps) {
    super(scope, id, props);
    this.msgx = props.msgx;
    this.topic = this.alarmTopic();
    this.action = new cwActions.SnsAction(this.topic);
    const pipeline = this.pipelineAlarms();
    this.functionAlarms(props.service);
    this.heartbeatAlarms();
    this.outboxAlarms();
    this.databaseAlarms(props.data);
    this.kafkaAlarms(props.messaging);
    this.rotationAlarms(props.data);
    this.apiAlarms(props.service);
    this.dashboard = this.createDashboard(props.service, pipeline);
  }

  private get thresholds() {
    return this.msgx.settings.alarms;
  }

  private get window() {
    return Duration.minutes(this.thresholds.evaluationMinutes);
  }

  /** For metrics that already sum a window: one datapoint at or above the threshold. */
  private static readonly AT_LEAST: AlarmOptions = {
    comparison: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    periods: 1,
  };

  private alarmTopic(): sns.Topic {
    const key = new kms.Key(this, 'AlarmTopicKey', {
      description: 'msgx alarm topic encryption',
      enableKeyRotation: true,
    });
    // CloudWatch publishes to an encrypted topic only if the key lets it.
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
        conditions: { StringEquals: { 'aws:SourceAccount': this.account } },
      }),
    );
    const topic = new sns.Topic(this, 'AlarmTopic', {
      topicName: `msgx-${this.msgx.stage}-alarms`,
      displayName: `msgx ${this.msgx.stage} alarms`,
      masterKey: key,
      enforceSSL: true,
    });
    if (this.msgx.alarmEmail) topic.addSubscription(new subs.EmailSubscription(this.msgx.alarmEmail));
    return topic;
  }

  private alarm(id: string, metric: cloudwatch.IMetric, threshold: number, description: string, o: AlarmOptions = {}): cloudwatch.Alarm {
    const periods = o.periods ?? this.thresholds.evaluationMinutes;
    const al = new cloudwatch.Alarm(this, id, {
      alarmName: `msgx-${this.msgx.stage}-${id}`,
      alarmDescription: description,
      metric,
      threshold,
      comparisonOperator: o.comparison ?? cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: periods,
      datapointsToAlarm: periods,
      // No datapoint means no worker reported; the Lambda Errors/Throttles alarms and the head
      // age seen by the next worker cover that, so silence itself does not page.
      treatMissingData: o.missing ?? cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    al.addAlarmAction(this.action);
    al.addOkAction(this.action);
    this.alarms.push(al);
    return al;
  }

  /** The FIFO head, the backlog, the oldest event and the dead letters; their metrics feed the dashboard. */
  private pipelineAlarms() {
    const a = this.thresholds;
    const headAge = custom(METRICS.headAge);
    const backlog = custom(METRICS.backlog);
    const oldestEvent = custom(METRICS.oldestPendingEvent);
    const dead = DEAD_KINDS.map((kind) => ({ kind, metric: custom(METRICS.deadCount, { kind }) }));
    this.alarm('HeadAge', headAge, a.headAgeSeconds, `FIFO head older than ${a.headAgeSeconds}s: the pipeline is stuck or paused`);
    this.alarm('Backlog', backlog, a.backlog, `More than ${a.backlog} messages waiting in proc_state`);
    this.alarm(
      'OldestPendingEvent',
      oldestEvent,
      a.oldestPendingEventSeconds,
      `An outbox event pending for over ${a.oldestPendingEventSeconds}s: delivery is failing`,
    );
    for (const d of dead)
      this.alarm(
        `Dead-${d.kind}`,
        d.metric,
        a.deadCount,
        `More than ${a.deadCount} DEAD ${d.kind} rows: see GET /admin/dead?kind=${d.kind}`,
      );
    return { headAge, backlog, oldestEvent, dead };
  }

  private functionAlarms(service: ServiceStack): void {
    const a = this.thresholds;
    for (const role of Object.keys(service.functions) as FunctionRole[]) {
      const fn = service.functions[role].fn;
      const errors = fn.metricErrors({ period: this.window, statistic: cloudwatch.Stats.SUM });
      this.alarm(
        `${role}-Errors`,
        errors,
        a.lambdaErrors,
        `${role}: >= ${a.lambdaErrors} errors in ${a.evaluationMinutes} min`,
        MonitoringStack.AT_LEAST,
      );
      const limit = role === 'pump' ? a.pumpThrottles : a.lambdaThrottles;
      const throttles = fn.metricThrottles({ period: this.window, statistic: cloudwatch.Stats.SUM });
      this.alarm(
        `${role}-Throttles`,
        throttles,
        limit,
        `${role}: >= ${limit} throttles in ${a.evaluationMinutes} min`,
        MonitoringStack.AT_LEAST,
      );
    }
  }

  /** Watchers of the watchers: a scheduled role that stops reporting pages. */
  private heartbeatAlarms(): void {
    const a = this.thresholds;
    const off = disabledRoles(this.msgx.functionEnv);
    for (const role of SCHEDULED_ROLES) {
      // A role switched off never runs: its silence is what the stage asked for.
      if (off.includes(role)) continue;
      // Missing data is BREACHING: a role that is not invoked, or dies before it reports, is silent.
      this.alarm(
        `${role}-Heartbeat`,
        custom(HEARTBEAT_METRIC, { role }, Duration.minutes(a.heartbeatMinutes), cloudwatch.Stats.SUM),
        1,
        `${role}: no completed run in ${a.heartbeatMinutes} min (schedule disabled, function failing, or lock held by a dead worker${role === 'pump' ? '; or the pipeline paused: see the Paused metric' : ''})`,
        { comparison: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD, periods: 1, missing: cloudwatch.TreatMissingData.BREACHING },
      );
      // Minimum over a minute is 1 only when every invocation of that minute found the lock taken.
      // A role the catalogue runs unlocked never finds it taken.
      if (!ROLE_CATALOGUE[role].lock) continue;
      this.alarm(
        `${role}-LockTaken`,
        custom(LOCK_TAKEN_METRIC, { role }, PERIOD, cloudwatch.Stats.MINIMUM),
        1,
        `${role}: every invocation found the role lock taken for ${a.lockTakenMinutes} min in a row (a stuck or overlong holder)`,
        { comparison: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, periods: a.lockTakenMinutes },
      );
    }
  }

  /** Gauges from the sweep (back-fills still owed) and from every dispatcher invocation. */
  private outboxAlarms(): void {
    const a = this.thresholds;
    this.alarm(
      'BackfillFailures',
      custom(BACKFILL_FAILURE_METRIC),
      a.backfillFailures,
      `More than ${a.backfillFailures} mailbox back-fills failing for ${a.evaluationMinutes} min: the mailbox refuses our DATE_PROCESSED writes`,
    );
    this.alarm(
      'StalledTargets',
      custom(STALLED_TARGETS_METRIC),
      a.stalledTargets,
      `More than ${a.stalledTargets} delivery targets stalled (broker or webhook unreachable) for ${a.evaluationMinutes} min`,
    );
    this.alarm(
      'OutboxBacklog',
      custom(OUTBOX_BACKLOG_METRIC),
      a.outboxBacklog,
      `More than ${a.outboxBacklog} outbox events waiting to be delivered`,
    );
  }

  private databaseAlarms(data: DataStack): void {
    const a = this.thresholds;
    const rds = (metricName: string, statistic: string) =>
      awsMetric('AWS/RDS', metricName, { DBInstanceIdentifier: data.postgres.instanceIdentifier }, statistic);
    this.alarm('Rds-Cpu', rds('CPUUtilization', cloudwatch.Stats.AVERAGE), a.rdsCpuPercent, `PostgreSQL CPU above ${a.rdsCpuPercent}%`);
    this.alarm(
      'Rds-FreeStorage',
      rds('FreeStorageSpace', cloudwatch.Stats.MINIMUM),
      a.rdsFreeStorageGb * 1024 ** 3,
      `PostgreSQL free storage below ${a.rdsFreeStorageGb} GiB`,
      { comparison: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD },
    );
    this.alarm(
      'Rds-Connections',
      rds('DatabaseConnections', cloudwatch.Stats.MAXIMUM),
      a.rdsConnections,
      `More than ${a.rdsConnections} PostgreSQL connections: check max_connections and the function concurrency`,
    );
  }

  private kafkaAlarms(messaging: MessagingStack): void {
    const a = this.thresholds;
    const cluster = { 'Cluster Name': messaging.clusterName };
    const mskBroker = (metricName: string, broker: number) =>
      awsMetric('AWS/Kafka', metricName, { ...cluster, 'Broker ID': String(broker) }, cloudwatch.Stats.MAXIMUM);
    for (let broker = 1; broker <= messaging.brokerCount; broker++) {
      this.alarm(
        `Msk-Disk-${broker}`,
        mskBroker('KafkaDataLogsDiskUsed', broker),
        a.mskDiskPercent,
        `MSK broker ${broker}: data volume above ${a.mskDiskPercent}% used`,
      );
      this.alarm(
        `Msk-UnderMinIsr-${broker}`,
        mskBroker('UnderMinIsrPartitionCount', broker),
        0,
        `MSK broker ${broker}: partitions below min.insync.replicas (acks=all writes to them fail)`,
      );
    }
    this.alarm(
      'Msk-OfflinePartitions',
      awsMetric('AWS/Kafka', 'OfflinePartitionsCount', cluster, cloudwatch.Stats.MAXIMUM),
      0,
      'MSK: partitions without a leader (unavailable to read and write)',
    );
    // One broker is the controller; none (summed over the brokers) means the cluster cannot elect leaders.
    this.alarm(
      'Msk-ActiveController',
      awsMetric('AWS/Kafka', 'ActiveControllerCount', cluster, cloudwatch.Stats.SUM),
      1,
      'MSK: no active controller',
      {
        comparison: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        missing: cloudwatch.TreatMissingData.BREACHING,
      },
    );
  }

  /** A rotation function that fails leaves the secret's pending version unpromoted: the next login may break. */
  private rotationAlarms(data: DataStack): void {
    for (const [i, functionName] of data.rotationFunctionNames.entries())
      this.alarm(
        `SecretRotation-${i === 0 ? 'admin' : 'app'}`,
        awsMetric('AWS/Lambda', 'Errors', { FunctionName: functionName }, cloudwatch.Stats.SUM, this.window),
        1,
        `Secret rotation failed (${functionName}): see its log group and the secret's AWSPENDING version`,
        MonitoringStack.AT_LEAST,
      );
  }

  private apiAlarms(service: ServiceStack): void {
    const a = this.thresholds;
    this.alarm(
      'Api-5xx',
      service.api.metricServerError({ period: this.window, statistic: cloudwatch.Stats.SUM }),
      a.api5xx,
      `>= ${a.api5xx} HTTP 5xx answers in ${a.evaluationMinutes} min`,
      MonitoringStack.AT_LEAST,
    );
  }

  private createDashboard(service: ServiceStack, p: ReturnType<MonitoringStack['pipelineAlarms']>): cloudwatch.Dashboard {
    const dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: `msgx-${this.msgx.stage}`,
      defaultInterval: Duration.hours(3),
    });
    const roles = Object.keys(service.functions) as FunctionRole[];
    const fnMetric = (name: 'metricInvocations' | 'metricErrors' | 'metricThrottles' | 'metricDuration', stat: string) =>
      roles.map((r) => service.functions[r].fn[name]({ period: PERIOD, statistic: stat, label: r }));
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({ title: 'FIFO head age (s)', left: [p.headAge], width: 8 }),
      new cloudwatch.GraphWidget({ title: 'Backlog', left: [p.backlog], width: 8 }),
      new cloudwatch.GraphWidget({ title: 'Oldest pending event (s)', left: [p.oldestEvent], width: 8 }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({ title: 'Dead by kind', left: p.dead.map((d) => d.metric.with({ label: d.kind })), width: 8 }),
      new cloudwatch.GraphWidget({ title: 'Invocations', left: fnMetric('metricInvocations', 'Sum'), width: 8 }),
      new cloudwatch.GraphWidget({
        title: 'Errors / Throttles',
        left: fnMetric('metricErrors', 'Sum'),
        right: fnMetric('metricThrottles', 'Sum'),
        width: 8,
      }),
    );
    dashboard.addWidgets(
      new cloudwatch.GraphWidget({ title: 'Duration p99 (ms)', left: fnMetric('metricDuration', 'p99'), width: 12 }),
      new cloudwatch.GraphWidget({
        title: 'API 4xx / 5xx / latency',
        left: [service.api.metricClientError({ period: PERIOD }), service.api.metricServerError({ period: PERIOD })],
        right: [service.api.metricLatency({ period: PERIOD, statistic: 'p99' })],
        width: 12,
      }),
      new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24 }),
    );
    return dashboard;
  }
}
