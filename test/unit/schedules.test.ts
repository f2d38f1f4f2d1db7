import { GetScheduleCommand, UpdateScheduleCommand } from '@aws-sdk/client-scheduler';
import { describe, expect, it } from 'vitest';
import { setSchedulesEnabled } from '../../lib/cli/schedules.ts';

/** `msgx pause|resume` in the cloud: every named schedule is read back and rewritten with the new state. */
describe('pausing the schedules', () => {
  // Each schedule answers with its own definition, so an update that sends back the wrong one fails.
  const definition = (Name: string, rate: string) => ({
    Name,
    GroupName: 'msgx-dev',
    ScheduleExpression: `rate(${rate})`,
    FlexibleTimeWindow: { Mode: 'OFF' },
    Target: { Arn: `arn:aws:lambda:eu-west-1:123456789012:function:${Name}`, RoleArn: 'arn:aws:iam::123456789012:role/scheduler' },
    Description: `${Name} schedule`,
    State: 'ENABLED',
  });
  const schedules: Record<string, ReturnType<typeof definition>> = {
    'msgx-dev-pump': definition('msgx-dev-pump', '1 minute'),
    'msgx-dev-poller': definition('msgx-dev-poller', '5 minutes'),
  };

  it('disables each schedule keeping its own definition, and does nothing without names (the twin)', async () => {
    const sent: unknown[] = [];
    const client = {
      send: async (cmd: unknown) => {
        sent.push(cmd);
        if (cmd instanceof GetScheduleCommand) {
          expect(cmd.input.GroupName).toBe('msgx-dev');
          return schedules[cmd.input.Name!];
        }
        return {};
      },
    } as never;
    const env = { MSGX_SCHEDULE_NAMES: 'msgx-dev-pump, msgx-dev-poller', MSGX_SCHEDULE_GROUP: 'msgx-dev' };
    expect(await setSchedulesEnabled(false, env, client)).toEqual(['msgx-dev-pump', 'msgx-dev-poller']);
    const updates = sent.filter((c): c is UpdateScheduleCommand => c instanceof UpdateScheduleCommand);
    expect(updates).toHaveLength(2);
    for (const u of updates) {
      const s = schedules[u.input.Name!]!;
      expect(u.input).toMatchObject({
        Name: s.Name,
        GroupName: 'msgx-dev',
        State: 'DISABLED',
        ScheduleExpression: s.ScheduleExpression,
        FlexibleTimeWindow: { Mode: 'OFF' },
        Target: s.Target,
        Description: s.Description,
      });
    }
    expect(updates.map((u) => u.input.Name)).toEqual(['msgx-dev-pump', 'msgx-dev-poller']);
    expect(updates[1]!.input.ScheduleExpression).toBe('rate(5 minutes)');
    sent.length = 0;
    expect(await setSchedulesEnabled(true, env, client)).toEqual(['msgx-dev-pump', 'msgx-dev-poller']);
    expect(sent.filter((c): c is UpdateScheduleCommand => c instanceof UpdateScheduleCommand).map((u) => u.input.State)).toEqual([
      'ENABLED',
      'ENABLED',
    ]);
    sent.length = 0;
    expect(await setSchedulesEnabled(true, {}, client)).toEqual([]);
    expect(sent).toEqual([]);
  });
});
