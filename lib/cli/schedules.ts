import { GetScheduleCommand, SchedulerClient, UpdateScheduleCommand } from '@aws-sdk/client-scheduler';

/**
 * In the cloud, pausing also disables the EventBridge schedules so no invocation starts at all.
 * The schedule names come from MSGX_SCHEDULE_NAMES (comma list) in MSGX_SCHEDULE_GROUP; in the
 * twin (neither set) only the pause flag applies, which the twin's own loops respect.
 */
export async function setSchedulesEnabled(
  enabled: boolean,
  env: Record<string, string | undefined> = process.env,
  given?: Pick<SchedulerClient, 'send'>,
): Promise<string[]> {
  const names = (env.MSGX_SCHEDULE_NAMES ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (names.length === 0) return [];
  // Made only when there are schedules: the twin needs no AWS client (and node 20 would print the
  // SDK's node-version warning on every `msgx pause`).
  const client = given ?? new SchedulerClient({});
  const group = env.MSGX_SCHEDULE_GROUP;
  for (const name of names) {
    const s = await client.send(new GetScheduleCommand({ Name: name, GroupName: group }));
    // UpdateSchedule replaces the whole definition: send back what was there, with the new state.
    await client.send(
      new UpdateScheduleCommand({
        Name: name,
        GroupName: group,
        ScheduleExpression: s.ScheduleExpression,
        ScheduleExpressionTimezone: s.ScheduleExpressionTimezone,
        FlexibleTimeWindow: s.FlexibleTimeWindow,
        Target: s.Target,
        Description: s.Description,
        StartDate: s.StartDate,
        EndDate: s.EndDate,
        KmsKeyArn: s.KmsKeyArn,
        ActionAfterCompletion: s.ActionAfterCompletion,
        State: enabled ? 'ENABLED' : 'DISABLED',
      }),
    );
  }
  return names;
}
