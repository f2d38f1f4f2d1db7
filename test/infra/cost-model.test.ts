import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { REPO_ROOT, type MsgxStacks } from '../../infra-cdk/build.ts';
import { SCHEDULED_ROLES, type ScheduledRole } from '../../infra-cdk/config.ts';
import { ROLE_CATALOGUE } from '../../lib/app/catalogue.ts';
import { BUDGET_MARGIN_MS } from '../../lib/jobs/coldStart.ts';
import { HANDOVER_LEAD_MS } from '../../lib/jobs/handover.ts';
import { synth } from './synth.ts';

// Two stages synthesized: minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

const MINUTES_PER_MONTH = 43_830;
const DOC = readFileSync(join(REPO_ROOT, 'docs/deploy.md'), 'utf8');

/** The rows of the table between `<!-- name:begin -->` and `<!-- name:end -->`, cells trimmed. */
function table(name: string): string[][] {
  const m = new RegExp(`<!-- ${name}:begin -->\\n([\\s\\S]*?)<!-- ${name}:end -->`).exec(DOC);
  if (!m) throw new Error(`docs/deploy.md has no ${name} table`);
  return m[1]!
    .trim()
    .split('\n')
    .slice(2)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
}
const int = (s: string) => Number(s.replaceAll(',', ''));

/** What the template says of a scheduled role: its schedule's rate, its function's timeout and memory. */
function roleFacts(s: MsgxStacks, role: ScheduledRole) {
  const t = Template.fromStack(s.service);
  const fn = t.toJSON().Resources[s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never)].Properties;
  const schedule = Object.values(t.findResources('AWS::Scheduler::Schedule')).find(
    (x) => x.Properties.Name === `msgx-${s.settings.stage}-${role}`,
  )!;
  const rate = /^rate\((\d+) minutes?\)$/.exec(schedule.Properties.ScheduleExpression as string);
  return { every: Number(rate![1]), timeout: fn.Timeout as number, memory: fn.MemorySize as number };
}

describe('docs/deploy.md cost model matches the templates', () => {
  const stacks: Record<string, MsgxStacks> = {};
  beforeAll(() => {
    for (const stage of ['dev', 'prod']) stacks[stage] = synth({ stage });
  });

  it('states every scheduled role of every stage, with its rate, timeout, memory, invocations and GB-s', () => {
    const rows = table('cost-model');
    expect(rows.map((r) => `${r[0]}/${r[1]}`).sort()).toEqual(
      ['dev', 'prod'].flatMap((st) => SCHEDULED_ROLES.map((r) => `${st}/${r}`)).sort(),
    );
    for (const [stage, role, every, timeout, memory, invocations, gbs] of rows) {
      const f = roleFacts(stacks[stage!]!, role as ScheduledRole);
      const what = `${stage} ${role}`;
      expect([int(every!), int(timeout!), int(memory!)], what).toEqual([f.every, f.timeout, f.memory]);
      // The catalogue is where dev's figures come from; a stage only overrides memory.
      expect(f.every, what).toBe(ROLE_CATALOGUE[role as ScheduledRole].everyMinutes);
      if (stage === 'dev') expect(f.memory, what).toBe(ROLE_CATALOGUE[role as ScheduledRole].memoryMb);
      const budget = f.timeout - BUDGET_MARGIN_MS / 1000;
      const handovers = (MINUTES_PER_MONTH * 60) / (budget - HANDOVER_LEAD_MS / 1000);
      const ticks = MINUTES_PER_MONTH / f.every;
      expect(int(invocations!), what).toBe(Math.round(ticks + handovers));
      expect(int(gbs!), what).toBe(Math.round((handovers * budget * f.memory) / 1024));
    }
  });

  it('states the NAT gateways, interface endpoints, brokers, database, secrets and alarms of each stage', () => {
    const rows = table('fixed-services');
    expect(rows.map((r) => r[0])).toEqual(['dev', 'prod']);
    for (const [stage, nats, endpoints, brokers, rds, secrets, alarms] of rows) {
      const s = stacks[stage!]!;
      const count = (t: Template, type: string) => Object.keys(t.findResources(type)).length;
      const network = Template.fromStack(s.network);
      expect(int(nats!), stage).toBe(count(network, 'AWS::EC2::NatGateway'));
      const interfaces = Object.values(network.findResources('AWS::EC2::VPCEndpoint')).filter(
        (e) => e.Properties.VpcEndpointType === 'Interface',
      ).length;
      expect(endpoints, stage).toBe(`${interfaces} × ${s.settings.settings.azs}`);
      const cluster = Object.values(Template.fromStack(s.messaging).findResources('AWS::MSK::Cluster'))[0]!.Properties;
      expect(brokers, stage).toBe(`${cluster.NumberOfBrokerNodes} × ${cluster.BrokerNodeGroupInfo.InstanceType}`);
      const db = Object.values(Template.fromStack(s.data).findResources('AWS::RDS::DBInstance'))[0]!.Properties;
      expect(rds, stage).toBe(`${db.DBInstanceClass}, ${db.MultiAZ ? 'Multi-AZ' : 'single-AZ'}`);
      expect(int(secrets!), stage).toBe(count(Template.fromStack(s.data), 'AWS::SecretsManager::Secret'));
      expect(int(alarms!), stage).toBe(count(Template.fromStack(s.monitoring), 'AWS::CloudWatch::Alarm'));
    }
  });

  it('states the loop length the catalogue and the cold-start margin give', () => {
    for (const role of SCHEDULED_ROLES) {
      const budget = ROLE_CATALOGUE[role].timeoutSeconds - BUDGET_MARGIN_MS / 1000;
      const prose = DOC.replace(/\s+/g, ' ');
      expect(prose).toContain(`timeout − 20 s = ${budget} s`);
      expect(prose).toContain(`new invocation every ${budget - HANDOVER_LEAD_MS / 1000} s`);
    }
  });
});
