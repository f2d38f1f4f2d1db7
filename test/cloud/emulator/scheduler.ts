import type { ServerResponse } from 'node:http';
import { sendJson } from './http.ts';

export interface ScheduleTarget {
  Arn: string;
  RoleArn: string;
  Input?: string;
  RetryPolicy?: { MaximumRetryAttempts?: number; MaximumEventAgeInSeconds?: number };
}

export interface Schedule {
  Name: string;
  GroupName: string;
  Arn: string;
  ScheduleExpression: string;
  ScheduleExpressionTimezone?: string;
  FlexibleTimeWindow: { Mode: string; MaximumWindowInMinutes?: number };
  Target: ScheduleTarget;
  State: 'ENABLED' | 'DISABLED';
  Description?: string;
  CreationDate: number;
  LastModificationDate: number;
}

export interface Firing {
  schedule: string;
  at: number;
  /** The target was invoked (false: the schedule was disabled, or the invoke was refused after its retries). */
  invoked: boolean;
  error?: string;
}

const UNIT_MS: Record<string, number> = {
  minute: 60_000,
  minutes: 60_000,
  hour: 3_600_000,
  hours: 3_600_000,
  day: 86_400_000,
  days: 86_400_000,
};

/**
 * EventBridge Scheduler: each schedule fires at its rate on the emulator's clock (`factor` times
 * faster than real time) and invokes its Lambda target asynchronously with its Input (default
 * `{}`), retrying a refused invoke as its RetryPolicy says. A DISABLED schedule does not fire.
 * GetSchedule, UpdateSchedule and ListSchedules are served (REST JSON) for the AWS SDK.
 */
export class SchedulerService {
  readonly schedules = new Map<string, Schedule>();
  readonly firings: Firing[] = [];
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(private readonly o: { factor: number; region: string; account: string; invoke: (arn: string, input: unknown) => void }) {}

  /** Creates or replaces a schedule (CloudFormation's create and update) and (re)starts its timer. */
  put(s: Omit<Schedule, 'Arn' | 'CreationDate' | 'LastModificationDate'>): Schedule {
    const key = `${s.GroupName}/${s.Name}`;
    const before = this.schedules.get(key);
    const now = Math.floor(Date.now() / 1000);
    const sched: Schedule = {
      ...s,
      Arn: `arn:aws:scheduler:${this.o.region}:${this.o.account}:schedule/${key}`,
      CreationDate: before?.CreationDate ?? now,
      LastModificationDate: now,
    };
    this.schedules.set(key, sched);
    this.arm(key, sched);
    return sched;
  }

  /** The interval of a `rate(n unit)` expression on the emulator's clock, in real milliseconds. */
  intervalMs(expression: string): number {
    const m = /^rate\((\d+) (minutes?|hours?|days?)\)$/.exec(expression);
    if (!m) throw new Error(`schedule expression ${expression} is not emulated (rate(n unit) only)`);
    return (Number(m[1]) * UNIT_MS[m[2]!]!) / this.o.factor;
  }

  /** Fires one schedule now (as its next tick would). */
  fire(key: string): void {
    const s = this.schedules.get(key);
    if (!s) throw new Error(`no schedule ${key}`);
    const firing: Firing = { schedule: key, at: Date.now(), invoked: false };
    this.firings.push(firing);
    if (s.State !== 'ENABLED') return;
    const attempts = 1 + (s.Target.RetryPolicy?.MaximumRetryAttempts ?? 185);
    for (let i = 0; i < attempts; i++) {
      try {
        this.o.invoke(s.Target.Arn, JSON.parse(s.Target.Input ?? '{}'));
        firing.invoked = true;
        return;
      } catch (err) {
        firing.error = (err as Error).message;
      }
    }
  }

  stop(): void {
    for (const t of this.timers.values()) clearInterval(t);
    this.timers.clear();
  }

  handleApi(method: string, url: URL, body: Record<string, unknown>, res: ServerResponse): void {
    const m = /^\/schedules\/([^/]+)$/.exec(url.pathname);
    const notFound = (what: string) =>
      sendJson(res, 404, { Message: `Schedule ${what} does not exist.` }, { 'x-amzn-errortype': 'ResourceNotFoundException' });
    if (method === 'GET' && url.pathname === '/schedules') {
      const group = url.searchParams.get('ScheduleGroup');
      const list = [...this.schedules.values()].filter((s) => !group || s.GroupName === group);
      return sendJson(res, 200, {
        Schedules: list.map((s) => ({ Name: s.Name, GroupName: s.GroupName, Arn: s.Arn, State: s.State, Target: { Arn: s.Target.Arn } })),
      });
    }
    if (!m) return sendJson(res, 404, { Message: `${method} ${url.pathname} is not emulated` }, { 'x-amzn-errortype': 'UnknownOperation' });
    const name = decodeURIComponent(m[1]!);
    if (method === 'GET') {
      const key = `${url.searchParams.get('groupName') ?? 'default'}/${name}`;
      const s = this.schedules.get(key);
      return s ? sendJson(res, 200, s) : notFound(key);
    }
    if (method === 'PUT') {
      const key = `${(body.GroupName as string | undefined) ?? 'default'}/${name}`;
      const before = this.schedules.get(key);
      if (!before) return notFound(key);
      const s = this.put({
        Name: name,
        GroupName: before.GroupName,
        ScheduleExpression: body.ScheduleExpression as string,
        ScheduleExpressionTimezone: body.ScheduleExpressionTimezone as string | undefined,
        FlexibleTimeWindow: body.FlexibleTimeWindow as Schedule['FlexibleTimeWindow'],
        Target: body.Target as ScheduleTarget,
        State: (body.State as Schedule['State'] | undefined) ?? 'ENABLED',
        Description: body.Description as string | undefined,
      });
      return sendJson(res, 200, { ScheduleArn: s.Arn });
    }
    sendJson(res, 405, { Message: `${method} is not emulated` }, { 'x-amzn-errortype': 'UnknownOperation' });
  }

  private arm(key: string, s: Schedule): void {
    clearInterval(this.timers.get(key));
    const t = setInterval(() => this.fire(key), this.intervalMs(s.ScheduleExpression));
    t.unref();
    this.timers.set(key, t);
  }
}
