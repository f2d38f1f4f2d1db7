import { GetScheduleCommand, UpdateScheduleCommand } from '@aws-sdk/client-scheduler';
import { describe, expect, it } from 'vitest';
import { setSchedulesEnabled } from '../../lib/cli/schedules.ts';

/** `msgx pause|resume` in the cloud: every named schedule is read back and rewritten with the new state. */
describe('pausing the schedules', () => {
  const schedule = {
    Name: 'msgx-dev-pump',
    GroupName: 'msgx-dev',
    ScheduleExpression: 'rate(1 minute)',
    FlexibleTimeWindow: { Mode: 'OFF' },
    Target: { Arn: 'arn:aws:lambda:eu-west-1:123456789012:function:msgx-dev-pump', RoleArn: 'arn:aws:iam::123456789012:role/scheduler' },
    State: 'ENABLED',
  };

  it('disables each schedule keeping its definition, and does nothing without names (the twin)', async () => {
    const sent: unknown[] = [];
    const client = {
      send: async (cmd: unknown) => {
        sent.push(cmd);
        return cmd instanceof GetScheduleCommand ? schedule : {};
      },
    } as never;
    const env = { MSGX_SCHEDULE_NAMES: 'msgx-dev-pump, msgx-dev-poller', MSGX_SCHEDULE_GROUP: 'msgx-dev' };
    expect(await setSchedulesEnabled(false, env, client)).toEqual(['msgx-dev-pump', 'msgx-dev-poller']);
    const updates = sent.filter((c): c is UpdateScheduleCommand => c instanceof UpdateScheduleCommand);
    expect(updates).toHaveLength(2);
    expect(updates[0]!.input).toMatchObject({
      Name: 'msgx-dev-pump',
      GroupName: 'msgx-dev',
      State: 'DISABLED',
      ScheduleExpression: 'rate(1 minute)',
      FlexibleTimeWindow: { Mode: 'OFF' },
      Target: schedule.Target,
    });
    expect(await setSchedulesEnabled(true, {}, client)).toEqual([]);
  });
});
