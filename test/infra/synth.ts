import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { buildMsgx, type MsgxStacks, REPO_ROOT } from '../../infra-cdk/build.ts';

export const MAILBOX_SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:cmin/mailbox-AbCdEf';
export const ALARM_EMAIL = 'msgx-oncall@corp.internal';
export const CDK_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, 'cdk.json'), 'utf8')).context as Record<string, unknown>;

/**
 * The app as `cdk synth` builds it, from cdk.json's context, without bundling and without nag.
 * `stages.<stage>` blocks given here are laid over cdk.json's (one level deep), as an edit would.
 */
export function synth(context: Record<string, unknown> = {}): MsgxStacks {
  const stages = { ...(CDK_CONTEXT.stages as Record<string, Record<string, unknown>>) };
  for (const [name, over] of Object.entries((context.stages ?? {}) as Record<string, Record<string, unknown>>)) {
    const base = stages[name] ?? {};
    const merged: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(over))
      merged[k] = typeof v === 'object' && v && !Array.isArray(v) ? { ...(base[k] as object), ...v } : v;
    stages[name] = merged;
  }
  const app = new App({
    context: {
      ...CDK_CONTEXT,
      bundling: 'skip',
      mailboxHost: 'cmin-db.corp.internal',
      mailboxSecretArn: MAILBOX_SECRET_ARN,
      alarmEmail: ALARM_EMAIL,
      ...context,
      stages,
    },
  });
  return buildMsgx(app, { nag: false });
}
