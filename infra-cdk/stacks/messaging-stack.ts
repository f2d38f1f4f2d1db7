import { Duration, Fn, Stack, type StackProps } from 'aws-cdk-lib';
import * as appscaling from 'aws-cdk-lib/aws-applicationautoscaling';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as msk from 'aws-cdk-lib/aws-msk';
import * as cr from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import { clusterNameOf, type MsgxSettings } from '../config.ts';
import type { NetworkStack } from './network-stack.ts';
import { acknowledge } from '../nag.ts';
import { dataRemovalPolicy } from '../retention.ts';

export interface MessagingStackProps extends StackProps {
  msgx: MsgxSettings;
  network: NetworkStack;
}

/** Kafka version of the twin's broker; MSK accepts the `3.9.x` track. */
export const KAFKA_VERSION = '3.9.x';

/**
 * Amazon MSK (provisioned, IAM client auth over TLS, encrypted, a cluster configuration with the
 * stage's replication settings, storage autoscaling) or an existing cluster
 * (`stages.<stage>.existing.msk`). Topics are not created here: the migrate function creates
 * them at deploy time, the same code the twin runs at start.
 */
export class MessagingStack extends Stack {
  /** Undefined when the stage uses an existing cluster. */
  readonly cluster?: msk.CfnCluster;
  readonly clusterArn: string;
  readonly clusterName: string;
  /** `BootstrapBrokerStringSaslIam`, comma separated host:9098 list. */
  readonly bootstrapBrokers: string;
  /** Broker count, for the per-broker disk alarms. */
  readonly brokerCount: number;

  constructor(scope: Construct, id: string, props: MessagingStackProps) {
    super(scope, id, props);
    const { stage, settings } = props.msgx;
    const { functionSg } = props.network;
    const existing = settings.existing.msk;

    if (existing) {
      this.clusterArn = existing.clusterArn;
      this.clusterName = clusterNameOf(existing.clusterArn);
      this.bootstrapBrokers = existing.bootstrapBrokers;
      this.brokerCount = existing.brokers ?? existing.bootstrapBrokers.split(',').length;
      if (existing.securityGroupId) {
        const sg = ec2.SecurityGroup.fromSecurityGroupId(this, 'KafkaSg', existing.securityGroupId, { mutable: true });
        sg.addIngressRule(functionSg, ec2.Port.tcp(9098), 'msgx functions to MSK (IAM/TLS)');
      }
      return;
    }

    this.clusterName = `msgx-${stage}`;
    this.brokerCount = settings.kafka.brokers;
    const cluster = this.createCluster(props);
    this.cluster = cluster;
    this.clusterArn = cluster.attrArn;
    if (settings.kafka.maxVolumeGb > 0) this.scaleStorage(cluster, settings.kafka);
    this.bootstrapBrokers = this.bootstrapBrokersOf(cluster);
  }

  private createCluster(props: MessagingStackProps): msk.CfnCluster {
    const { stage, settings } = props.msgx;
    const { vpc, functionSg } = props.network;
    const k = settings.kafka;
    const kafkaSg = new ec2.SecurityGroup(this, 'KafkaSg', { vpc, description: 'msgx MSK brokers', allowAllOutbound: false });
    // 9098 is the IAM-authenticated TLS listener of MSK.
    kafkaSg.addIngressRule(functionSg, ec2.Port.tcp(9098), 'msgx functions to MSK (IAM/TLS)');
    const removalPolicy = dataRemovalPolicy(stage);
    const brokerLogs = new logs.LogGroup(this, 'BrokerLogs', {
      retention: settings.functions.logRetentionDays,
      removalPolicy,
    });
    // Topics the migrate function creates take the broker defaults: no per-topic factor in code.
    const configuration = new msk.CfnConfiguration(this, 'Config', {
      name: `msgx-${stage}`,
      description: `msgx ${stage}: replication ${k.replicationFactor}, min ISR ${k.minInsyncReplicas}`,
      kafkaVersionsList: ['3.9.x'],
      serverProperties: [
        `default.replication.factor=${k.replicationFactor}`,
        `min.insync.replicas=${k.minInsyncReplicas}`,
        'auto.create.topics.enable=false',
        'unclean.leader.election.enable=false',
      ].join('\n'),
    });
    const cluster = new msk.CfnCluster(this, 'Cluster', {
      clusterName: this.clusterName,
      kafkaVersion: KAFKA_VERSION,
      numberOfBrokerNodes: k.brokers,
      brokerNodeGroupInfo: {
        instanceType: k.instanceType,
        clientSubnets: vpc.selectSubnets(props.network.dataSubnets).subnetIds,
        securityGroups: [kafkaSg.securityGroupId],
        storageInfo: { ebsStorageInfo: { volumeSize: k.volumeGb } },
      },
      // The latest revision: an edit of serverProperties makes a new one, and the brokers take it.
      configurationInfo: { arn: configuration.attrArn, revision: configuration.attrLatestRevisionRevision },
      clientAuthentication: { sasl: { iam: { enabled: true } }, unauthenticated: { enabled: false } },
      encryptionInfo: { encryptionInTransit: { clientBroker: 'TLS', inCluster: true } },
      loggingInfo: { brokerLogs: { cloudWatchLogs: { enabled: true, logGroup: brokerLogs.logGroupName } } },
      enhancedMonitoring: 'PER_TOPIC_PER_BROKER',
    });
    configuration.applyRemovalPolicy(removalPolicy);
    cluster.applyRemovalPolicy(removalPolicy);
    return cluster;
  }

  /** MSK storage autoscaling is Application Auto Scaling on the broker volume size. */
  private scaleStorage(cluster: msk.CfnCluster, k: MsgxSettings['settings']['kafka']): void {
    const target = new appscaling.ScalableTarget(this, 'StorageScaling', {
      serviceNamespace: appscaling.ServiceNamespace.KAFKA,
      scalableDimension: 'kafka:broker-storage:VolumeSize',
      resourceId: cluster.attrArn,
      minCapacity: k.volumeGb,
      maxCapacity: k.maxVolumeGb,
    });
    target.scaleToTrackMetric('StorageUtilization', {
      predefinedMetric: appscaling.PredefinedMetric.KAFKA_BROKER_STORAGE_UTILIZATION,
      targetValue: 60,
      // MSK cannot shrink a volume.
      disableScaleIn: true,
    });
  }

  /** CloudFormation has no attribute for the bootstrap string; ask the Kafka API once per deploy. */
  private bootstrapBrokersOf(cluster: msk.CfnCluster): string {
    const brokers = new cr.AwsCustomResource(this, 'BootstrapBrokers', {
      onUpdate: {
        service: 'Kafka',
        action: 'getBootstrapBrokers',
        parameters: { ClusterArn: cluster.attrArn },
        physicalResourceId: cr.PhysicalResourceId.of(cluster.attrArn),
        outputPaths: ['BootstrapBrokerStringSaslIam'],
      },
      policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: [cluster.attrArn] }),
      installLatestAwsSdk: false,
      timeout: Duration.minutes(2),
    });
    acknowledge(this, [
      {
        id: 'AwsSolutions-IAM4',
        reason: 'The CDK-provided AwsCustomResource handler uses AWSLambdaBasicExecutionRole for its own logs only.',
        appliesTo: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'],
      },
      {
        id: 'AwsSolutions-L1',
        reason: 'The AwsCustomResource handler runtime is chosen by aws-cdk-lib, not by msgx.',
      },
    ]);
    return brokers.getResponseField('BootstrapBrokerStringSaslIam');
  }
}

/** arn:…:cluster/<name>/<uuid> → arn:…:topic/<name>/<uuid>/<topic>. */
export function topicArnOf(scope: Stack, clusterArn: string, topic: string): string {
  const parts = Fn.split('/', clusterArn, 3);
  return `arn:${scope.partition}:kafka:${scope.region}:${scope.account}:topic/${Fn.select(1, parts)}/${Fn.select(2, parts)}/${topic}`;
}
