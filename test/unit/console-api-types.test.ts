import { describe, expect, expectTypeOf, it } from 'vitest';
import type * as Console from '../../lib/http/console/src/model.ts';
import { CLASSES, REPLAYABLE } from '../../lib/http/console/src/model.ts';
import type { readMessageTrace } from '../../lib/observability/trace.ts';
import type { readThroughput } from '../../lib/observability/throughput.ts';
import type { deadEvents, deadEventsByTarget, pendingByTarget } from '../../lib/outbox/queries.ts';
import type { deliveryProblems } from '../../lib/outbox/problems.ts';
import type { eventsBySource } from '../../lib/outbox/sourceEvents.ts';
import type { replayDeadEvents } from '../../lib/outbox/replay.ts';
import type { orderingStats } from '../../lib/pipeline/frontier.ts';
import type { isPaused } from '../../lib/pipeline/pause.ts';
import type { listDead, pipelineStats } from '../../lib/pipeline/procState.ts';
import type { replayMessages } from '../../lib/pipeline/replay.ts';
import { REPLAYABLE_CLASSES } from '../../lib/pipeline/states.ts';
import type { ErrorClass } from '../../lib/shared/errors.ts';
import type { deadTxMessages } from '../../lib/txmsg/dead.ts';
import type { resend } from '../../lib/txmsg/resend.ts';
import type { TxRow } from '../../lib/txmsg/store.ts';
import type { readTrace } from '../../lib/txmsg/trace.ts';
import type { TxMessageView } from '../../lib/txmsg/view.ts';
import type { txCountsByStatus } from '../../lib/txmsg/stats.ts';

/**
 * The console's browser code mirrors the admin API's JSON in lib/http/console/src/model.ts (it
 * cannot import the server's types: their modules import the database drivers). This file is
 * where the two meet: each server answer, serialised as JSON (a Date becomes its ISO string),
 * must fit what the console reads. The checks are types — `tsc --noEmit` fails on a field the
 * server renamed, dropped or retyped; the test below only makes vitest count the file. The
 * answers are assembled from the functions each route calls (lib/http/adminRoutes.ts,
 * consoleRoutes.ts, lib/txmsg/routes.ts).
 */

/** What JSON.stringify makes of a value, as far as the types go. */
type Json<T> = T extends Date ? string : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
type Answer<F extends (...args: never[]) => Promise<unknown>> = Json<Awaited<ReturnType<F>>>;

// GET /admin/stats
type Stats = Json<
  { at: string; paused: Awaited<ReturnType<typeof isPaused>>; pipeline: Awaited<ReturnType<typeof pipelineStats>> } & {
    ordering: Awaited<ReturnType<typeof orderingStats>>;
    events: Awaited<ReturnType<typeof pendingByTarget>>;
    deadEvents: Awaited<ReturnType<typeof deadEventsByTarget>>;
    txmsg: Awaited<ReturnType<typeof txCountsByStatus>>;
  } & Awaited<ReturnType<typeof deliveryProblems>>
>;
// POST /admin/replay: kind=proc as it is, kind=event reshaped by the route.
type EventReplay = Answer<typeof replayDeadEvents>;
type EventReplayAnswer = { dryRun: boolean; moved: { eventId: number }[]; refused: EventReplay['skipped']; warnings: string[] };
// GET /admin/trace/{msgId}: the server types snapshot rows as plain records; the console names their columns.
type MessageTrace = Json<NonNullable<Awaited<ReturnType<typeof readMessageTrace>>>>;

describe('the console reads the JSON the admin API sends', () => {
  it('the error classes are the server’s', () => {
    expectTypeOf<Console.StatsJson>().toBeObject(); // keeps the type-only import in use
    expect([...REPLAYABLE]).toEqual([...REPLAYABLE_CLASSES]);
    expectTypeOf<(typeof CLASSES)[number]>().toEqualTypeOf<ErrorClass>();
  });

  it('types line up (checked by tsc --noEmit)', () => {
    expectTypeOf<Stats>().toExtend<Console.StatsJson>();
    expectTypeOf<Answer<typeof readThroughput>>().toExtend<Console.ThroughputJson>();
    expectTypeOf<Answer<typeof listDead>>().toExtend<Console.DeadProcJson[]>();
    expectTypeOf<Answer<typeof deadEvents>>().toExtend<Console.DeadEventJson[]>();
    expectTypeOf<Answer<typeof deadTxMessages>>().toExtend<Console.TxMessageJson[]>();
    expectTypeOf<Answer<typeof replayMessages>>().toExtend<Console.ReplayJson>();
    expectTypeOf<EventReplayAnswer>().toExtend<Console.ReplayJson>();
    expectTypeOf<Answer<typeof resend>>().toExtend<Console.ResendJson>();
    expectTypeOf<Omit<MessageTrace, 'snapshot'>>().toExtend<Omit<Console.MessageTraceJson, 'snapshot'>>();
    // GET /admin/tx-messages/{id}/trace: { message: { ...toView(row), deadPhase: row.dead_phase }, trace }
    expectTypeOf<{
      message: TxMessageView & { deadPhase: TxRow['dead_phase'] };
      trace: Answer<typeof readTrace>;
    }>().toExtend<Console.TxTraceJson>();
    // GET /admin/events: the source's events without their values.
    expectTypeOf<{ items: Omit<Answer<typeof eventsBySource>[number], 'value'>[] }>().toExtend<Console.SourceEventsJson>();
  });
});
