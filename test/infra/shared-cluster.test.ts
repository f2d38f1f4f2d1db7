import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { MsgxStacks } from '../../infra-cdk/build.ts';
import { synth } from './synth.ts';

// Two stages synthesized: minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

type Statement = { Action: string | string[]; Resource: unknown };
const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

/** Every kafka-cluster statement of the service stack's policies. */
function kafkaStatements(s: MsgxStacks): Statement[] {
  const policies = Template.fromStack(s.service).findResources('AWS::IAM::Policy');
  return Object.values(policies)
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[])
    .filter((st) => list(st.Action).some((a) => a.startsWith('kafka-cluster:')));
}

/** The last part of a topic / group / transactional-id ARN built with Fn::Join. */
function resourceTail(r: unknown): { kind: string; name: string } | undefined {
  const j = JSON.stringify(r);
  const m = /:(topic|group|transactional-id)\/.*\/([^"/]*)"\]\]\}$/.exec(j);
  return m ? { kind: m[1]!, name: m[2]! } : undefined;
}

describe('least privilege on a shared MSK cluster', () => {
  for (const stage of ['dev', 'prod']) {
    it(`${stage}: topics are named exactly, transactional ids and the cursor group carry the stage prefix`, () => {
      const s = synth({ stage });
      const topics = [s.settings.kafka.topicMsg, s.settings.kafka.topicSchd, 'msgx.offsets'].flatMap((t) => [t, `${t}.shadow`]);
      const tails = kafkaStatements(s)
        .flatMap((st) => list(st.Resource).map(resourceTail))
        .filter(Boolean) as {
        kind: string;
        name: string;
      }[];
      expect(tails.filter((t) => t.kind === 'topic').map((t) => t.name)).toEqual(expect.arrayContaining(topics));
      for (const t of tails.filter((x) => x.kind === 'topic')) expect(topics, t.name).toContain(t.name);
      const txIds = tails.filter((t) => t.kind === 'transactional-id').map((t) => t.name);
      expect(txIds).toEqual([`msgx.${stage}.*`]);
      // The only consumer group: the one the dispatcher reads its exactly-once cursors back with.
      expect([...new Set(tails.filter((t) => t.kind === 'group').map((t) => t.name))]).toEqual([`msgx.${stage}.cursor-*`]);
      const acts = kafkaStatements(s).flatMap((st) => list(st.Action));
      expect([...new Set(acts.filter((a) => a.includes('Group') || a.includes('*')))].sort()).toEqual([
        'kafka-cluster:AlterGroup',
        'kafka-cluster:DescribeGroup',
      ]);
    });
  }

  it('grants a listed transactional topic and nothing wider', () => {
    const s = synth({ stages: { dev: { env: { MSGX_TX_TOPICS: 'orders.events' } } } });
    const names = kafkaStatements(s)
      .flatMap((st) => list(st.Resource).map(resourceTail))
      .filter((t) => t?.kind === 'topic')
      .map((t) => t!.name);
    expect(names).toContain('orders.events');
    expect(names.filter((n) => n.includes('*'))).toEqual([]);
  });
});

describe('several stages on one existing MSK cluster', () => {
  const VPC = {
    id: 'vpc-0a1b2c3d4e5f60718',
    cidr: '10.20.0.0/16',
    availabilityZones: ['eu-west-1a', 'eu-west-1b'],
    appSubnetIds: ['subnet-0aa1', 'subnet-0bb2'],
  };
  const MSK = {
    clusterArn: 'arn:aws:kafka:eu-west-1:210987654321:cluster/platform-kafka/1f2e3d4c-aaaa-bbbb-cccc-0123456789ab-3',
    bootstrapBrokers: 'b-1.platformkafka.x1.c3.kafka.eu-west-1.amazonaws.com:9098',
  };
  const onCluster = (env: Record<string, string>, arn = MSK.clusterArn) => ({
    existing: { vpc: VPC, msk: { ...MSK, clusterArn: arn } },
    env,
  });
  /** Every topic any function of the stage is granted (several functions write or create topics). */
  const topicGrants = (s: MsgxStacks) =>
    [
      ...new Set(
        kafkaStatements(s)
          .flatMap((st) => list(st.Resource).map(resourceTail))
          .filter((t) => t?.kind === 'topic')
          .map((t) => t!.name),
      ),
    ].sort();

  it("refuses two stages writing the same topics on it, naming the stage's setting and the other stage", () => {
    expect(() => synth({ stage: 'dev', stages: { dev: onCluster({}), prod: onCluster({}) } })).toThrow(
      /stages\.dev\.env\.MSGX_TOPIC_MSG, MSGX_TOPIC_SCHD and MSGX_TOPIC_OFFSETS: stage prod uses the same MSK cluster \(platform-kafka\) and the same topics msgx\.msg, msgx\.schd, msgx\.offsets/,
    );
    // One topic in common is one too many.
    expect(() =>
      synth({
        stage: 'prod',
        stages: {
          dev: onCluster({ MSGX_TOPIC_MSG: 'msgx.dev.msg', MSGX_TOPIC_OFFSETS: 'msgx.dev.offsets' }),
          prod: onCluster({ MSGX_TOPIC_MSG: 'msgx.prod.msg', MSGX_TOPIC_OFFSETS: 'msgx.prod.offsets' }),
        },
      }),
    ).toThrow(/stages\.prod\.env\.MSGX_TOPIC_MSG, MSGX_TOPIC_SCHD and MSGX_TOPIC_OFFSETS: stage dev .* the same topic msgx\.schd,/);
    // The cursors' topic alone in common would mix the two stages' cursors.
    expect(() =>
      synth({
        stage: 'dev',
        stages: {
          dev: onCluster({ MSGX_TOPIC_MSG: 'msgx.dev.msg', MSGX_TOPIC_SCHD: 'msgx.dev.schd' }),
          prod: onCluster({ MSGX_TOPIC_MSG: 'msgx.prod.msg', MSGX_TOPIC_SCHD: 'msgx.prod.schd' }),
        },
      }),
    ).toThrow(/the same topic msgx\.offsets,/);
    // Another cluster, the same names: nothing shared.
    const other = 'arn:aws:kafka:eu-west-1:210987654321:cluster/other-kafka/9f2e3d4c-aaaa-bbbb-cccc-0123456789ab-3';
    expect(() => synth({ stage: 'dev', stages: { dev: onCluster({}), prod: onCluster({}, other) } })).not.toThrow();
  });

  it("with a stage's own topic names, each stage's dispatcher may write its own topics and not the other's", () => {
    const stages = {
      dev: onCluster({ MSGX_TOPIC_MSG: 'msgx.dev.msg', MSGX_TOPIC_SCHD: 'msgx.dev.schd', MSGX_TOPIC_OFFSETS: 'msgx.dev.offsets' }),
      prod: onCluster({ MSGX_TOPIC_MSG: 'msgx.prod.msg', MSGX_TOPIC_SCHD: 'msgx.prod.schd', MSGX_TOPIC_OFFSETS: 'msgx.prod.offsets' }),
    };
    for (const stage of ['dev', 'prod']) {
      const s = synth({ stage, stages });
      expect(topicGrants(s), stage).toEqual(
        [
          `msgx.${stage}.msg`,
          `msgx.${stage}.msg.shadow`,
          `msgx.${stage}.offsets`,
          `msgx.${stage}.offsets.shadow`,
          `msgx.${stage}.schd`,
          `msgx.${stage}.schd.shadow`,
        ].sort(),
      );
      expect(s.settings.functionEnv).toMatchObject({ MSGX_TOPIC_MSG: `msgx.${stage}.msg`, MSGX_TOPIC_SCHD: `msgx.${stage}.schd` });
    }
  });
});

describe('data that outlives the stack', () => {
  let dev: MsgxStacks;
  let prod: MsgxStacks;
  beforeAll(() => {
    dev = synth();
    prod = synth({ stage: 'prod' });
  });

  const policies = (s: MsgxStacks, type: string) =>
    [s.network, s.data, s.messaging, s.service].flatMap((st) =>
      Object.entries(Template.fromStack(st).findResources(type)).map(([id, r]) => ({
        id,
        deletion: r.DeletionPolicy as string | undefined,
        replace: r.UpdateReplacePolicy as string | undefined,
      })),
    );

  it('prod retains the MSK cluster, its configuration, every secret and every log group', () => {
    for (const type of ['AWS::MSK::Cluster', 'AWS::MSK::Configuration', 'AWS::SecretsManager::Secret', 'AWS::Logs::LogGroup']) {
      const got = policies(prod, type);
      expect(got.length, type).toBeGreaterThan(0);
      for (const r of got) expect([r.id, r.deletion, r.replace]).toEqual([r.id, 'Retain', 'Retain']);
    }
  });

  it('dev deletes them with the stack', () => {
    for (const type of ['AWS::MSK::Cluster', 'AWS::MSK::Configuration', 'AWS::SecretsManager::Secret', 'AWS::Logs::LogGroup'])
      for (const r of policies(dev, type)) expect([r.id, r.deletion]).toEqual([r.id, 'Delete']);
  });

  it('the cluster runs the latest revision of its configuration', () => {
    for (const s of [dev, prod]) {
      const t = Template.fromStack(s.messaging);
      const configId = Object.keys(t.findResources('AWS::MSK::Configuration'))[0]!;
      t.hasResourceProperties('AWS::MSK::Cluster', {
        ConfigurationInfo: { Arn: { 'Fn::GetAtt': [configId, 'Arn'] }, Revision: { 'Fn::GetAtt': [configId, 'LatestRevision.Revision'] } },
      });
    }
  });

  it('alarms on MSK under-min-ISR, offline partitions, no controller, and on failed secret rotations', () => {
    const alarms = Object.values(Template.fromStack(prod.monitoring).findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties);
    const names = alarms.map((a) => String(a.AlarmName));
    for (const b of [1, 2, 3]) expect(names).toContain(`msgx-prod-Msk-UnderMinIsr-${b}`);
    expect(names).toEqual(
      expect.arrayContaining([
        'msgx-prod-Msk-OfflinePartitions',
        'msgx-prod-Msk-ActiveController',
        'msgx-prod-SecretRotation-admin',
        'msgx-prod-SecretRotation-app',
      ]),
    );
    const controller = alarms.find((a) => a.AlarmName === 'msgx-prod-Msk-ActiveController')!;
    expect([controller.ComparisonOperator, controller.Threshold, controller.TreatMissingData]).toEqual([
      'LessThanThreshold',
      1,
      'breaching',
    ]);
    // The rotation alarms watch the functions the hosted rotations create (their names are fixed by the construct).
    const rotation = alarms.filter((a) => String(a.AlarmName).includes('SecretRotation'));
    const fnNames = rotation.map((a) => (a.Dimensions as { Name: string; Value: string }[]).find((d) => d.Name === 'FunctionName')!.Value);
    const params = Object.values(Template.fromStack(prod.data).findResources('AWS::Serverless::Application')).map(
      (r) => r.Properties.Parameters.functionName as string,
    );
    expect(fnNames.sort()).toEqual(params.sort());
  });
});
