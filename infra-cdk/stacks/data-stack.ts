import { Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as rds from 'aws-cdk-lib/aws-rds';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import type { MsgxSettings } from '../config.ts';
import type { NetworkStack } from './network-stack.ts';
import { acknowledge, type NagAcknowledgment } from '../nag.ts';

export interface DataStackProps extends StackProps {
  msgx: MsgxSettings;
  network: NetworkStack;
}

export const DB_NAME = 'msgx';

/**
 * msgx's own PostgreSQL (RDS, encrypted, backed up, credentials in Secrets Manager with
 * rotation) and the HMAC signing secret for calls msgx makes to other services.
 */
export class DataStack extends Stack {
  readonly db: rds.DatabaseInstance;
  readonly dbSecret: secretsmanager.ISecret;
  readonly signingSecret: secretsmanager.Secret;

  constructor(scope: Construct, id: string, props: DataStackProps) {
    super(scope, id, props);
    const { stage, settings } = props.msgx;
    const { vpc, functionSg } = props.network;
    const dbSg = new ec2.SecurityGroup(this, 'DbSg', { vpc, description: 'msgx PostgreSQL', allowAllOutbound: false });
    dbSg.addIngressRule(functionSg, ec2.Port.tcp(5432), 'msgx functions to PostgreSQL');
    const s = settings.db;
    const version =
      s.engineVersion === '15' ? rds.PostgresEngineVersion.VER_15 : rds.PostgresEngineVersion.VER_16;
    const engine = rds.DatabaseInstanceEngine.postgres({ version });

    const parameters = new rds.ParameterGroup(this, 'Params', {
      engine,
      description: 'msgx: keepalives free a dead worker\'s advisory lock within seconds',
      parameters: {
        // A Lambda killed mid-loop leaves its session (and its advisory lock) behind; server-side
        // keepalives notice the dead peer in ~25 s so the next scheduled worker can take over.
        tcp_keepalives_idle: '10',
        tcp_keepalives_interval: '5',
        tcp_keepalives_count: '3',
        idle_in_transaction_session_timeout: '60000',
        'rds.force_ssl': '1',
        log_min_duration_statement: '1000',
      },
    });

    const removalPolicy =
      s.removalPolicy === 'destroy'
        ? RemovalPolicy.DESTROY
        : s.removalPolicy === 'retain'
          ? RemovalPolicy.RETAIN
          : RemovalPolicy.SNAPSHOT;

    const instanceIdentifier = `msgx-${stage}`;
    // Created up front (instead of `cloudwatchLogsRetention`, which deploys a log-retention Lambda).
    const pgLogs = new logs.LogGroup(this, 'PostgresLogs', {
      logGroupName: `/aws/rds/instance/${instanceIdentifier}/postgresql`,
      retention: settings.functions.logRetentionDays,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.db = new rds.DatabaseInstance(this, 'Postgres', {
      engine,
      instanceIdentifier,
      instanceType: new ec2.InstanceType(s.instanceType),
      vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED },
      securityGroups: [dbSg],
      port: 5432,
      databaseName: DB_NAME,
      credentials: rds.Credentials.fromGeneratedSecret('msgx_admin', { secretName: `msgx/${stage}/postgres` }),
      parameterGroup: parameters,
      storageEncrypted: true,
      storageType: rds.StorageType.GP3,
      allocatedStorage: s.allocatedStorageGb,
      maxAllocatedStorage: s.maxAllocatedStorageGb,
      multiAz: s.multiAz,
      backupRetention: Duration.days(s.backupRetentionDays),
      deleteAutomatedBackups: false,
      deletionProtection: s.deletionProtection,
      removalPolicy,
      iamAuthentication: true,
      autoMinorVersionUpgrade: true,
      enablePerformanceInsights: true,
      cloudwatchLogsExports: ['postgresql'],
      monitoringInterval: Duration.seconds(60),
      publiclyAccessible: false,
    });
    this.db.node.addDependency(pgLogs);
    if (!this.db.secret) throw new Error('generated database secret missing');
    this.dbSecret = this.db.secret;
    this.db.addRotationSingleUser({
      automaticallyAfter: Duration.days(s.rotationDays),
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
    });

    this.signingSecret = new secretsmanager.Secret(this, 'SigningSecret', {
      secretName: `msgx/${stage}/signing`,
      description: 'HMAC-SHA256 key for the msgx-signature header on check-back and webhook calls',
      generateSecretString: { passwordLength: 64, excludePunctuation: true, includeSpace: false },
    });

    const reasons: NagAcknowledgment[] = [
      {
        id: 'AwsSolutions-IAM4',
        reason: 'Enhanced monitoring needs the AWS-maintained AmazonRDSEnhancedMonitoringRole policy; it grants only log delivery.',
        appliesTo: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole'],
      },
      {
        id: 'AwsSolutions-RDS11',
        reason: 'The database is reachable only from the msgx function security group in isolated subnets; a non-default port adds no protection there.',
      },
    ];
    if (!s.multiAz)
      reasons.push({ id: 'AwsSolutions-RDS3', reason: `Stage ${stage} runs single-AZ by choice (stages.${stage}.db.multiAz); prod enables Multi-AZ.` });
    if (!s.deletionProtection)
      reasons.push({
        id: 'AwsSolutions-RDS10',
        reason: `Stage ${stage} is disposable (stages.${stage}.db.deletionProtection=false); prod enables deletion protection.`,
      });
    acknowledge(this.db, reasons);
    acknowledge(this.signingSecret, [
      {
        id: 'AwsSolutions-SMG4',
        reason: 'The signing key is shared with every receiver that verifies msgx-signature; rotating it is a coordinated manual change, not an automatic one.',
      },
    ]);
  }
}
