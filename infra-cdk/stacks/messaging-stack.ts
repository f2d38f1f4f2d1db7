import { Fn, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as msk from 'aws-cdk-lib/aws-msk';
import * as cr from 'aws-cdk-lib/custom-resources';
import type { Construct } from 'constructs';
import type { MsgxSettings } from '../config.ts';
import type { NetworkStack } from './network-stack.ts';
import { acknowledge } from '../nag.ts';

export interface MessagingStackProps extends StackProps {
  msgx: MsgxSettings;
  network: NetworkStack;
}

/** Kafka version of the twin's broker; MSK accepts the `3.9.x` track. */
export const KAFKA_VERSION = '3.9.x';

/**
 * Amazon MSK (provisioned, IAM client auth over TLS, encrypted) and its IAM bootstrap broker
 * string. Topics are not created here: the migrate function creates them at deploy time, the
 * same code the twin runs at start.
 */
export class MessagingStack extends Stack {
  readonly cluster: msk.CfnCluster;
  readonly clusterName: string;
  /** `BootstrapBrokerStringSaslIam`, comma separated host:9098 list. */
  readonly bootstrapBrokers: string;

  constructor(scope: Construct, id: string, props: MessagingStackProps) {
    super(scope, id, props);
    const { stage, settings } = props.msgx;
    const { vpc, functionSg } = props.network;
    const kafkaSg = new ec2.SecurityGroup(this, 'KafkaSg', { vpc, description: 'msgx MSK brokers', allowAllOutbound: false });
    // 9098 is the IAM-authenticated TLS listener of MSK.
    kafkaSg.addIngressRule(functionSg, ec2.Port.tcp(9098), 'msgx functions to MSK (IAM/TLS)');
    this.clusterName = `msgx-${stage}`;

    const brokerLogs = new logs.LogGroup(this, 'BrokerLogs', {
      retention: settings.functions.logRetentionDays,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.cluster = new msk.CfnCluster(this, 'Cluster', {
      clusterName: this.clusterName,
      kafkaVersion: KAFKA_VERSION,
      numberOfBrokerNodes: settings.kafka.brokers,
      brokerNodeGroupInfo: {
        instanceType: settings.kafka.instanceType,
        clientSubnets: vpc.selectSubnets({ subnetType: ec2.SubnetType.PRIVATE_ISOLATED }).subnetIds,
        securityGroups: [kafkaSg.securityGroupId],
        storageInfo: { ebsStorageInfo: { volumeSize: settings.kafka.volumeGb } },
      },
      clientAuthentication: { sasl: { iam: { enabled: true } }, unauthenticated: { enabled: false } },
      encryptionInfo: { encryptionInTransit: { clientBroker: 'TLS', inCluster: true } },
      loggingInfo: { brokerLogs: { cloudWatchLogs: { enabled: true, logGroup: brokerLogs.logGroupName } } },
      enhancedMonitoring: 'PER_TOPIC_PER_BROKER',
    });

    // CloudFormation has no attribute for the bootstrap string; ask the Kafka API once per deploy.
    const brokers = new cr.AwsCustomResource(this, 'BootstrapBrokers', {
      onUpdate: {
        service: 'Kafka',
        action: 'getBootstrapBrokers',
        parameters: { ClusterArn: this.cluster.attrArn },
        physicalResourceId: cr.PhysicalResourceId.of(this.cluster.attrArn),
        outputPaths: ['BootstrapBrokerStringSaslIam'],
      },
      policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: [this.cluster.attrArn] }),
      installLatestAwsSdk: false,
    });
    this.bootstrapBrokers = brokers.getResponseField('BootstrapBrokerStringSaslIam');

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
  }

  /** ARN of a topic in this cluster (a name or a pattern such as `*`). */
  topicArn(scope: Stack, topic: string): string {
    return topicArnOf(scope, this.cluster.attrArn, topic);
  }
}

/** arn:…:cluster/<name>/<uuid> → arn:…:topic/<name>/<uuid>/<topic>. */
export function topicArnOf(scope: Stack, clusterArn: string, topic: string): string {
  const parts = Fn.split('/', clusterArn, 3);
  return `arn:${scope.partition}:kafka:${scope.region}:${scope.account}:topic/${Fn.select(1, parts)}/${Fn.select(2, parts)}/${topic}`;
}
