import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it, vi } from 'vitest';
import { synth } from './synth.ts';
import { FUNCTION_ROLES } from '../../infra-cdk/config.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

const VPC = {
  id: 'vpc-0a1b2c3d4e5f60718',
  cidr: '10.20.0.0/16',
  availabilityZones: ['eu-west-1a', 'eu-west-1b', 'eu-west-1c'],
  appSubnetIds: ['subnet-0aa1', 'subnet-0bb2', 'subnet-0cc3'],
  dataSubnetIds: ['subnet-0dd4', 'subnet-0ee5', 'subnet-0ff6'],
};
const PG = {
  endpoint: 'orders-pg.c9akciq32.eu-west-1.rds.amazonaws.com',
  secretArn: 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:platform/msgx-pg-Zx81Qa',
  securityGroupId: 'sg-0abc1234def567890',
};
const MSK = {
  clusterArn: 'arn:aws:kafka:eu-west-1:210987654321:cluster/platform-kafka/1f2e3d4c-aaaa-bbbb-cccc-0123456789ab-3',
  bootstrapBrokers: 'b-1.platformkafka.x1.c3.kafka.eu-west-1.amazonaws.com:9098,b-2.platformkafka.x1.c3.kafka.eu-west-1.amazonaws.com:9098',
  securityGroupId: 'sg-0fed9876cba543210',
};

/** cdk.json's stage block with `existing` added, as a platform team would write it. */
function withExisting(existing: Record<string, unknown>, stage = 'dev') {
  return synth({ stage, stages: { [stage]: { existing } } });
}

describe('brownfield: existing infrastructure from stage settings', () => {
  it('uses an existing VPC by attributes (offline), its subnets for the functions, no VPC of its own', () => {
    const s = withExisting({ vpc: VPC });
    const net = Template.fromStack(s.network);
    net.resourceCountIs('AWS::EC2::VPC', 0);
    net.resourceCountIs('AWS::EC2::Subnet', 0);
    net.resourceCountIs('AWS::EC2::NatGateway', 0);
    // Its own endpoints would clash with the VPC's private DNS: off unless asked.
    net.resourceCountIs('AWS::EC2::VPCEndpoint', 0);
    net.hasResourceProperties('AWS::EC2::SecurityGroup', { VpcId: VPC.id, GroupDescription: 'msgx functions' });
    const fns = Object.values(Template.fromStack(s.service).findResources('AWS::Lambda::Function'))
      .map((f) => f.Properties)
      .filter((p) => String(p.Description ?? '').startsWith('msgx '));
    expect(fns).toHaveLength(FUNCTION_ROLES.length);
    for (const p of fns) expect(p.VpcConfig.SubnetIds).toEqual(VPC.appSubnetIds);
    // The database msgx still creates goes into the given data subnets.
    Template.fromStack(s.data).hasResourceProperties('AWS::RDS::DBSubnetGroup', { SubnetIds: VPC.dataSubnetIds });
    Template.fromStack(s.messaging).hasResourceProperties('AWS::MSK::Cluster', {
      BrokerNodeGroupInfo: { ClientSubnets: VPC.dataSubnetIds },
    });
  });

  it('creates the endpoints in an existing VPC only when asked', () => {
    const s = withExisting({ vpc: { ...VPC, createEndpoints: true } });
    expect(Object.keys(Template.fromStack(s.network).findResources('AWS::EC2::VPCEndpoint'))).toHaveLength(3);
  });

  it('uses an existing PostgreSQL: no instance, its secret and endpoint, an ingress rule on its group', () => {
    const s = synth({ stages: { dev: { existing: { vpc: VPC, postgres: PG }, db: { maxConnections: 200 } } } });
    const data = Template.fromStack(s.data);
    data.resourceCountIs('AWS::RDS::DBInstance', 0);
    data.resourceCountIs('AWS::SecretsManager::RotationSchedule', 0);
    data.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { GroupId: PG.securityGroupId, FromPort: 5432, ToPort: 5432 });
    const svc = Template.fromStack(s.service).toJSON().Resources;
    for (const role of ['ingress', 'pump', 'migrate'] as const) {
      const env = svc[s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never)].Properties.Environment.Variables;
      expect(env.MSGX_PG_SECRET_ARN, role).toBe(PG.secretArn);
      expect(env.MSGX_PG_HOST, role).toBe(PG.endpoint);
      expect(env.MSGX_PG_APP_SECRET_ARN, role).toBeUndefined();
    }
    // The RDS alarms watch the given instance (its identifier is the endpoint's first label).
    Template.fromStack(s.monitoring).hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/RDS',
      MetricName: 'CPUUtilization',
      Dimensions: [{ Name: 'DBInstanceIdentifier', Value: 'orders-pg' }],
    });
  });

  it('uses an existing MSK cluster: no cluster, its brokers, grants on its ARN, disk alarms per broker', () => {
    const s = withExisting({ vpc: VPC, msk: MSK });
    const m = Template.fromStack(s.messaging);
    m.resourceCountIs('AWS::MSK::Cluster', 0);
    m.resourceCountIs('AWS::MSK::Configuration', 0);
    m.hasResourceProperties('AWS::EC2::SecurityGroupIngress', { GroupId: MSK.securityGroupId, FromPort: 9098 });
    const svc = Template.fromStack(s.service).toJSON().Resources;
    const dispatcher = svc[s.service.getLogicalId(s.service.functions.dispatcher.fn.node.defaultChild as never)];
    expect(dispatcher.Properties.Environment.Variables.MSGX_KAFKA_BROKERS).toBe(MSK.bootstrapBrokers);
    const policies = JSON.stringify(Template.fromStack(s.service).findResources('AWS::IAM::Policy'));
    expect(policies).toContain(MSK.clusterArn);
    expect(policies).toContain(':topic/platform-kafka/');
    const disks = Object.values(Template.fromStack(s.monitoring).findResources('AWS::CloudWatch::Alarm'))
      .map((a) => a.Properties)
      .filter((p) => p.MetricName === 'KafkaDataLogsDiskUsed');
    expect(disks.map((p) => p.Dimensions.find((d: { Name: string }) => d.Name === 'Cluster Name').Value)).toEqual([
      'platform-kafka',
      'platform-kafka',
    ]);
  });

  it('needs the VPC for an existing database or cluster, and checks each id, naming the setting', () => {
    expect(() => withExisting({ postgres: PG })).toThrow(/stages\.dev\.existing\.postgres needs stages\.dev\.existing\.vpc/);
    expect(() => withExisting({ vpc: { ...VPC, id: 'my-vpc' } })).toThrow(/stages\.dev\.existing\.vpc\.id must be a VPC id/);
    expect(() => withExisting({ vpc: { ...VPC, appSubnetIds: ['subnet-0aa1'] } })).toThrow(
      /existing\.vpc\.appSubnetIds must be one subnet per AZ/,
    );
    expect(() => withExisting({ vpc: VPC, postgres: { ...PG, secretArn: 'platform/msgx-pg' } })).toThrow(/existing\.postgres\.secretArn/);
    expect(() => withExisting({ vpc: VPC, msk: { ...MSK, bootstrapBrokers: 'b-1:9092' } })).toThrow(/existing\.msk\.bootstrapBrokers/);
  });
});

describe('placeholders are refused at synth time, naming the setting', () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    [
      'mailbox secret in account 111111111111',
      { mailboxSecretArn: 'arn:aws:secretsmanager:us-east-1:111111111111:secret:msgx/mailbox-AbCdEf' },
      /context mailboxSecretArn .*account 111111111111/,
    ],
    ['mailbox host with "example"', { mailboxHost: 'mailbox.example.com' }, /context mailboxHost looks like a placeholder/],
    ['the docs account', { account: '123456789012', region: 'eu-west-1' }, /context account .*account 123456789012/],
    ['an e-mail at example.com', { alarmEmail: 'ops@example.com' }, /context alarmEmail/],
    ['a placeholder check-back origin', { txCheckAllowedOrigins: 'https://placeholder.corp.internal' }, /context txCheckAllowedOrigins/],
  ];
  for (const [name, ctx, error] of cases) it(`refuses ${name}`, () => expect(() => synth(ctx)).toThrow(error));

  it('refuses placeholders in existing-infrastructure settings, in prod as in dev', () => {
    for (const stage of ['dev', 'prod'])
      expect(() =>
        withExisting(
          { vpc: VPC, postgres: { ...PG, secretArn: 'arn:aws:secretsmanager:eu-west-1:111111111111:secret:msgx-pg-AbCdEf' } },
          stage,
        ),
      ).toThrow(new RegExp(`stages\\.${stage}\\.existing\\.postgres\\.secretArn .*111111111111`));
    expect(() => withExisting({ vpc: VPC, postgres: { ...PG, endpoint: 'db.example.internal' } })).toThrow(
      /stages\.dev\.existing\.postgres\.endpoint looks like a placeholder/,
    );
  });
});

describe('MSK and concurrency settings', () => {
  it('runs prod MSK in 3 AZs with replication factor 3, min ISR 2 and storage autoscaling', () => {
    const s = synth({ stage: 'prod' });
    const m = Template.fromStack(s.messaging);
    const cluster = Object.values(m.findResources('AWS::MSK::Cluster'))[0]!.Properties;
    expect(cluster.NumberOfBrokerNodes).toBe(3);
    expect(cluster.BrokerNodeGroupInfo.ClientSubnets).toHaveLength(3);
    expect(cluster.ConfigurationInfo.Arn).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^Config/), 'Arn'] });
    const config = Object.values(m.findResources('AWS::MSK::Configuration'))[0]!.Properties.ServerProperties as string;
    expect(config.split('\n')).toEqual(
      expect.arrayContaining(['default.replication.factor=3', 'min.insync.replicas=2', 'auto.create.topics.enable=false']),
    );
    m.hasResourceProperties('AWS::ApplicationAutoScaling::ScalableTarget', {
      ServiceNamespace: 'kafka',
      ScalableDimension: 'kafka:broker-storage:VolumeSize',
      MinCapacity: 200,
      MaxCapacity: 1000,
    });
    m.hasResourceProperties('AWS::ApplicationAutoScaling::ScalingPolicy', {
      TargetTrackingScalingPolicyConfiguration: {
        PredefinedMetricSpecification: { PredefinedMetricType: 'KafkaBrokerStorageUtilization' },
      },
    });
    // Three AZs in the VPC, taken from Fn::GetAZs so synth needs no lookup.
    const subnets = Object.values(Template.fromStack(s.network).findResources('AWS::EC2::Subnet'));
    expect(new Set(subnets.map((x) => JSON.stringify(x.Properties.AvailabilityZone))).size).toBe(3);
  });

  it('refuses a replication setting that would stop writes or cannot be placed', () => {
    expect(() => synth({ stages: { dev: { kafka: { minInsyncReplicas: 2, replicationFactor: 2 } } } })).toThrow(
      /stages\.dev\.kafka\.minInsyncReplicas/,
    );
    expect(() => synth({ stages: { dev: { azs: 3 } } })).toThrow(/stages\.dev\.kafka\.brokers must be a multiple of stages\.dev\.azs/);
  });

  it('reserves concurrency only where configured', () => {
    const s = synth({ stages: { dev: { functions: { reservedConcurrency: { pump: 2 } } } } });
    const res = Template.fromStack(s.service).toJSON().Resources;
    const reserved = (role: 'pump' | 'poller') =>
      res[s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never)].Properties.ReservedConcurrentExecutions;
    expect(reserved('pump')).toBe(2);
    expect(reserved('poller')).toBeUndefined();
    expect(() => synth({ stages: { dev: { functions: { reservedConcurrency: { pump: 0 } } } } })).toThrow(
      /stages\.dev\.functions\.reservedConcurrency\.pump must be a positive integer/,
    );
  });
});
