import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it, vi } from 'vitest';
import type { MsgxStacks } from '../../infra-cdk/build.ts';
import { loadConfig } from '../../lib/config/config.ts';
import { ExactlyOnceSinks } from '../../lib/outbox/exactlyOnce.ts';
import { cursorGroupId, transactionalId } from '../../lib/constants.ts';
import { synth } from './synth.ts';

// Exactly once into Kafka as the cloud runs it: what the dispatcher's code will name (its
// transactional ids, its cursor group, its offsets topic), derived from the synthesized function's
// own environment through the real config loader, against what its IAM role grants. The emulated
// cloud enforces no MSK IAM, so this is where a mismatch shows before a deploy.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

type Statement = { Action: string | string[]; Resource: unknown };
const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

/** The last part of a topic / group / transactional-id ARN (a Fn::Join or a string). */
function tail(r: unknown): { kind: string; name: string } | undefined {
  const m = /:(topic|group|transactional-id)\/.*\/([^"/]*)"(\]\]\})?$/.exec(JSON.stringify(r));
  return m ? { kind: m[1]!, name: m[2]! } : undefined;
}

const globMatch = (glob: string, name: string) =>
  new RegExp(
    `^${glob
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  ).test(name);

function fnOf(s: MsgxStacks, description: string) {
  const t = Template.fromStack(s.service);
  const [id, fn] = Object.entries(t.findResources('AWS::Lambda::Function')).find(([, f]) =>
    String(f.Properties.Description).startsWith(description),
  )!;
  // The function names its role by Fn::GetAtt [<role>, Arn]; a policy names it by Ref.
  const role = JSON.stringify({ Ref: (fn.Properties.Role as { 'Fn::GetAtt': string[] })['Fn::GetAtt'][0] });
  const statements = Object.values(t.findResources('AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles).includes(role))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
  /** The names granted `action` of `kind`, as patterns. */
  const granted = (action: string, kind: string) =>
    statements
      .filter((st) => list(st.Action).includes(action))
      .flatMap((st) => list(st.Resource).map(tail))
      .filter((x) => x?.kind === kind)
      .map((x) => x!.name);
  // The config the function loads at cold start: its literal variables, and stand-ins for what
  // CloudFormation resolves (brokers) or the cold start assembles (the database URL).
  const env: Record<string, string> = { MSGX_PG_URL: 'postgres://msgx@db.internal/msgx' };
  for (const [k, v] of Object.entries(fn.Properties.Environment.Variables as Record<string, unknown>))
    env[k] = typeof v === 'string' ? v : k === 'MSGX_KAFKA_BROKERS' ? 'b-1.msk.internal:9098' : 'token';
  return { id, granted, config: loadConfig(env) };
}

describe('exactly once: the dispatcher is granted what its code names', () => {
  for (const [name, context] of [
    ['dev', {}],
    ['prod', { stage: 'prod' }],
    [
      'dev in shadow mode with its own offsets topic',
      { stages: { dev: { env: { MSGX_SHADOW: '1', MSGX_TOPIC_OFFSETS: 'cmin.cursors' } } } },
    ],
  ] as const) {
    it(name, () => {
      const s = synth(context);
      const d = fnOf(s, 'msgx dispatcher');
      const { topicOffsets, exactlyOnce } = d.config.outbox;
      expect(exactlyOnce).toBe(true);
      // The stage the relay itself opens its producers and cursor reader with (nothing connects).
      const { stage } = new ExactlyOnceSinks(d.config);
      expect(stage).toBe(s.settings.stage);

      // Transactional ids: the grant's one pattern covers every target's id, and no other stage's.
      const ids = d.granted('kafka-cluster:AlterTransactionalId', 'transactional-id');
      expect(ids).toEqual(d.granted('kafka-cluster:DescribeTransactionalId', 'transactional-id'));
      expect(ids).toEqual([transactionalId(stage, '*')]);
      for (const target of ['msg', 'schd', 'tx:orders.events', 'webhook:0'])
        expect(globMatch(ids[0]!, transactionalId(stage, target)), target).toBe(true);
      expect(globMatch(ids[0]!, transactionalId(`${stage}x`, 'msg'))).toBe(false);

      // The offsets topic: written in each transaction, read back at start.
      for (const action of ['kafka-cluster:WriteData', 'kafka-cluster:ReadData', 'kafka-cluster:DescribeTopic'])
        expect(d.granted(action, 'topic'), action).toContain(topicOffsets);
      // Read nothing else: the dispatcher consumes no event topic.
      expect(d.granted('kafka-cluster:ReadData', 'topic').every((t) => t.startsWith(topicOffsets.replace(/\.shadow$/, '')))).toBe(true);

      // The cursor reader's consumer group.
      const groups = d.granted('kafka-cluster:AlterGroup', 'group');
      expect(groups).toEqual(d.granted('kafka-cluster:DescribeGroup', 'group'));
      expect(groups).toHaveLength(1);
      expect(globMatch(groups[0]!, cursorGroupId(stage))).toBe(true);
      expect(globMatch(groups[0]!, cursorGroupId(`${stage}x`))).toBe(false);

      // Migrate creates the offsets topic at deploy (lib/outbox/topics.ts ensureTopics).
      const m = fnOf(s, 'msgx migrate');
      expect(m.config.outbox.topicOffsets).toBe(topicOffsets);
      expect(m.granted('kafka-cluster:CreateTopic', 'topic')).toContain(topicOffsets);
    });
  }
});
