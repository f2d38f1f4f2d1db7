import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type App, type Environment, Tags, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { type MsgxSettings, readSettings } from './config.ts';
import { DataStack } from './stacks/data-stack.ts';
import { MessagingStack } from './stacks/messaging-stack.ts';
import { MonitoringStack } from './stacks/monitoring-stack.ts';
import { NetworkStack } from './stacks/network-stack.ts';
import { ServiceStack } from './stacks/service-stack.ts';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export interface MsgxStacks {
  settings: MsgxSettings;
  network: NetworkStack;
  data: DataStack;
  messaging: MessagingStack;
  service: ServiceStack;
  monitoring: MonitoringStack;
}

export interface BuildOptions {
  repoRoot?: string;
  /** Add the cdk-nag AwsSolutions pack (default: context `nag`, true). */
  nag?: boolean;
}

/** Every msgx stack of one stage, wired together. Used by app.ts and by the infra tests. */
export function buildMsgx(app: App, options: BuildOptions = {}): MsgxStacks {
  const settings = readSettings(app.node);
  const repoRoot = options.repoRoot ?? REPO_ROOT;
  // Environment-agnostic unless both are given: synth then needs no account and no lookups.
  const env: Environment | undefined =
    settings.account && settings.region ? { account: settings.account, region: settings.region } : undefined;
  const p = settings.prefix;
  const base = { env, msgx: settings };

  const network = new NetworkStack(app, `${p}-Network`, { ...base, description: 'msgx: VPC, endpoints, security groups' });
  const data = new DataStack(app, `${p}-Data`, { ...base, network, description: 'msgx: PostgreSQL and secrets' });
  const messaging = new MessagingStack(app, `${p}-Messaging`, { ...base, network, description: 'msgx: MSK (IAM auth)' });
  const service = new ServiceStack(app, `${p}-Service`, {
    ...base,
    repoRoot,
    network,
    data,
    messaging,
    description: 'msgx: functions, HTTP API, schedules, migrations',
  });
  const monitoring = new MonitoringStack(app, `${p}-Monitoring`, {
    ...base,
    service,
    data,
    messaging,
    description: 'msgx: alarms and dashboard',
  });

  // CloudFormation refuses Tags on these two types (cfn-lint E3002), though CDK would render them.
  const untaggable = { excludeResourceTypes: ['AWS::CloudWatch::Dashboard', 'AWS::ApplicationAutoScaling::ScalableTarget'] };
  Tags.of(app).add('app', 'msgx', untaggable);
  Tags.of(app).add('stage', settings.stage, untaggable);
  // cdk-nag v3 is a CDK policy-validation plugin: any unacknowledged error fails `cdk synth`.
  if (options.nag ?? settings.nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { settings, network, data, messaging, service, monitoring };
}
