import { Duration, Names, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as rds from 'aws-cdk-lib/aws-rds';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import type { MsgxSettings } from '../config.ts';
import type { NetworkStack } from './network-stack.ts';
import { acknowledge, type NagAcknowledgment } from '../nag.ts';
import { dataRemovalPolicy } from '../retention.ts';

export interface DataStackProps extends StackProps {
  msgx: MsgxSettings;
  network: NetworkStack;
}

export const DB_NAME = 'msgx';
/** The user the functions connect as; the admin user (rotated separately) only rotates it. */
export const APP_USER = 'msgx_app';

/** What the functions need to reach msgx's PostgreSQL, created here or existing. */
export interface PostgresEndpoint {
  host: string;
  port: string;
  database: string;
  /** `{username, password}` the functions connect with (re-read on an authentication failure). */
  secret: secretsmanager.ISecret;
  securityGroup: ec2.ISecurityGroup;
  /** For the RDS alarms: the DB instance identifier. */
  instanceIdentifier: string;
  /**
   * Created databases only: the admin secret the migrate function uses to create the functions'
   * user (and to run migrations); with an existing database the migrate function uses `secret`.
   */
  adminSecret?: secretsmanager.ISecret;
}

/**
 * msgx's own PostgreSQL (RDS, encrypted, backed up, credentials in Secrets Manager with
 * alternating-users rotation) or an existing one (`stages.<stage>.existing.postgres`), and the
 * HMAC signing secret for calls msgx makes to other services.
 */
export class DataStack extends Stack {
  /** Undefined when the stage uses an existing database. */
  readonly db?: rds.DatabaseInstance;
  readonly postgres: PostgresEndpoint;
  readonly signingSecret: secretsmanager.Secret;
  /** The rotation functions' names (created databases only), for the rotation-failure alarms. */
  readonly rotationFunctionNames: string[] = [];

  constructor(scope: Construct, id: string, props: DataStackProps) {
    super(scope, id, props);
    const { stage, settings } = props.msgx;
    const { vpc, functionSg } = props.network;
    const existing = settings.existing.postgres;

    if (existing) {
      const port = existing.port ?? 5432;
      const sg = ec2.SecurityGroup.fromSecurityGroupId(this, 'DbSg', existing.securityGroupId, { mutable: true });
      sg.addIngressRule(functionSg, ec2.Port.tcp(port), 'msgx functions to PostgreSQL');
      this.postgres = {
        host: existing.endpoint,
        port: String(port),
        database: existing.database ?? DB_NAME,
        secret: secretsmanager.Secret.fromSecretCompleteArn(this, 'DbSecret', existing.secretArn),
        securityGroup: sg,
        // RDS endpoints start with the instance identifier (<id>.<hash>.<region>.rds.amazonaws.com).
        instanceIdentifier: existing.endpoint.split('.')[0]!,
      };
    } else {
      const created = this.createDatabase(props, vpc, functionSg);
      this.db = created.db;
      this.postgres = created.endpoint;
    }

    this.signingSecret = new secretsmanager.Secret(this, 'SigningSecret', {
      secretName: `msgx/${stage}/signing`,
      description: 'HMAC-SHA256 key for the msgx-signature header on check-back and webhook calls',
      generateSecretString: { passwordLength: 64, excludePunctuation: true, includeSpace: false },
      removalPolicy: dataRemovalPolicy(stage),
    });
    acknowledge(this.signingSecret, [
      {
        id: 'AwsSolutions-SMG4',
        reason:
          'The signing key is shared with every receiver that verifies msgx-signature; rotating it is a coordinated manual change, not an automatic one.',
      },
    ]);
  }

  private createDatabase(
    props: DataStackProps,
    vpc: ec2.IVpc,
    functionSg: ec2.ISecurityGroup,
  ): { db: rds.DatabaseInstance; endpoint: PostgresEndpoint } {
    const { stage, settings } = props.msgx;
    const dbSg = new ec2.SecurityGroup(this, 'DbSg', { vpc, description: 'msgx PostgreSQL', allowAllOutbound: false });
    dbSg.addIngressRule(functionSg, ec2.Port.tcp(5432), 'msgx functions to PostgreSQL');
    const instanceIdentifier = `msgx-${stage}`;
    const db = this.createInstance(props, dbSg, instanceIdentifier);
    if (!db.secret) throw new Error('generated database secret missing');
    // Prod keeps the credentials of a database it keeps (its snapshot or the retained instance);
    // the generated admin secret is a child of the instance, not db.secret (its attachment).
    for (const c of db.node.findAll()) if (c instanceof secretsmanager.CfnSecret) c.applyRemovalPolicy(dataRemovalPolicy(stage));
    const appSecret = this.rotateSecrets(props, db);
    acknowledge(db, instanceNagReasons(stage, settings.db));
    return {
      db,
      endpoint: {
        host: db.dbInstanceEndpointAddress,
        port: db.dbInstanceEndpointPort,
        database: DB_NAME,
        secret: appSecret,
        securityGroup: dbSg,
        instanceIdentifier,
        adminSecret: db.secret,
      },
    };
  }

  private createInstance(props: DataStackProps, dbSg: ec2.ISecurityGroup, instanceIdentifier: string): rds.DatabaseInstance {
    const { stage, settings } = props.msgx;
    const s = settings.db;
    const major = s.engineVersion.split('.')[0]!;
    const engine = rds.DatabaseInstanceEngine.postgres({ version: rds.PostgresEngineVersion.of(s.engineVersion, major) });
    const removalPolicy =
      s.removalPolicy === 'destroy' ? RemovalPolicy.DESTROY : s.removalPolicy === 'retain' ? RemovalPolicy.RETAIN : RemovalPolicy.SNAPSHOT;
    // Created up front (instead of `cloudwatchLogsRetention`, which deploys a log-retention Lambda).
    const pgLogs = new logs.LogGroup(this, 'PostgresLogs', {
      logGroupName: `/aws/rds/instance/${instanceIdentifier}/postgresql`,
      retention: settings.functions.logRetentionDays,
      removalPolicy: dataRemovalPolicy(stage),
    });
    const db = new rds.DatabaseInstance(this, 'Postgres', {
      engine,
      instanceIdentifier,
      instanceType: new ec2.InstanceType(s.instanceType),
      vpc: props.network.vpc,
      vpcSubnets: props.network.dataSubnets,
      securityGroups: [dbSg],
      port: 5432,
      databaseName: DB_NAME,
      credentials: rds.Credentials.fromGeneratedSecret('msgx_admin', { secretName: `msgx/${stage}/postgres` }),
      parameterGroup: this.parameterGroup(engine),
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
    db.node.addDependency(pgLogs);
    return db;
  }

  private parameterGroup(engine: rds.IInstanceEngine): rds.ParameterGroup {
    return new rds.ParameterGroup(this, 'Params', {
      engine,
      description: "msgx: keepalives free a dead worker's advisory lock within seconds",
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
  }

  /**
   * The admin secret rotates alone. The functions connect as msgx_app, rotated with the
   * alternating-users strategy: the rotation clones msgx_app into msgx_app_clone (and back) and
   * only then moves the secret, so the password a warm function holds stays valid until the next
   * rotation. The migrate function creates the role on first deploy (see docs/deploy.md).
   */
  private rotateSecrets(props: DataStackProps, db: rds.DatabaseInstance): secretsmanager.ISecret {
    const { stage, settings } = props.msgx;
    const rotationSubnets = props.network.appSubnets;
    const adminRotation = db.addRotationSingleUser({
      automaticallyAfter: Duration.days(settings.db.rotationDays),
      vpcSubnets: rotationSubnets,
    });
    const appSecret = new rds.DatabaseSecret(this, 'AppSecret', {
      username: APP_USER,
      secretName: `msgx/${stage}/postgres-app`,
      masterSecret: db.secret,
      excludeCharacters: ' %+~`#$&*()|[]{}:;<>?!\'/@"\\',
    });
    appSecret.applyRemovalPolicy(dataRemovalPolicy(stage));
    const appAttached = appSecret.attach(db);
    const appRotation = db.addRotationMultiUser('AppRotation', {
      secret: appAttached,
      automaticallyAfter: Duration.days(settings.db.rotationDays),
      vpcSubnets: rotationSubnets,
    });
    // The hosted rotation names its function as SecretRotation does: the construct's unique id, at most 64 characters.
    for (const r of [adminRotation, appRotation]) this.rotationFunctionNames.push(Names.uniqueId(r).slice(-64));
    return appAttached;
  }
}

/** What cdk-nag is told about the instance, and why; the single-AZ and unprotected stages by name. */
function instanceNagReasons(stage: string, s: MsgxSettings['settings']['db']): NagAcknowledgment[] {
  const reasons: NagAcknowledgment[] = [
    {
      id: 'AwsSolutions-IAM4',
      reason: 'Enhanced monitoring needs the AWS-maintained AmazonRDSEnhancedMonitoringRole policy; it grants only log delivery.',
      appliesTo: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole'],
    },
    {
      id: 'AwsSolutions-RDS11',
      reason:
        'The database is reachable only from the msgx function security group in isolated subnets; a non-default port adds no protection there.',
    },
  ];
  if (!s.multiAz)
    reasons.push({
      id: 'AwsSolutions-RDS3',
      reason: `Stage ${stage} runs single-AZ by choice (stages.${stage}.db.multiAz); prod enables Multi-AZ.`,
    });
  if (!s.deletionProtection)
    reasons.push({
      id: 'AwsSolutions-RDS10',
      reason: `Stage ${stage} is disposable (stages.${stage}.db.deletionProtection=false); prod enables deletion protection.`,
    });
  return reasons;
}
