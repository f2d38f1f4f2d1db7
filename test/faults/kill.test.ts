import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '../helpers/services.ts';
import {
  checkInvariants,
  drained,
  type FaultRun,
  FlightWorkload,
  idleInTransaction,
  progress,
  rng,
  RoleProcesses,
  type RoleName,
  setupRun,
  sleep,
} from './harness.ts';

/**
 * SIGKILL of the pump, the poller and the dispatcher at random points of a 5,000-message run
 * (at least 50 kills, at least 50 of them while the pipeline had work in hand), each restarted at
 * once; the sweep runs alongside and heals the back-fills a killed pump left. Afterwards: no
 * message lost or processed twice, per-FLID order kept on both topics once duplicates are dropped,
 * every mailbox row back-filled by the roles themselves, no idle-in-transaction session, and no
 * role failure logged at all (a SIGKILL of one role must not make another fail).
 */
const MESSAGES = Number(process.env.FAULTS_MESSAGES ?? 5000);
const MIN_KILLS = Number(process.env.FAULTS_KILLS ?? 50);
const SEED = Number(process.env.FAULTS_SEED ?? Date.now() % 1_000_000);

let run: FaultRun;
let roles: RoleProcesses;
beforeAll(async () => {
  run = await setupRun('kill', {
    MSGX_GROUP_COMMIT: '5',
    MSGX_CLAIM_BATCH: '20',
    MSGX_DELIVERY_BATCH_SIZE: '20',
  });
  roles = new RoleProcesses(run);
});
afterAll(async () => {
  await roles?.stopAll();
  await run?.drop();
});

it(`${MESSAGES} messages, ${MIN_KILLS}+ SIGKILLs of pump, poller and dispatcher: nothing lost, nothing twice, order kept`, async () => {
  const started = Date.now();
  const rand = rng(SEED);
  const w = new FlightWorkload(200, SEED);
  await w.insertPlan(run.my);
  const all: RoleName[] = ['pump', 'poller', 'dispatcher'];
  await Promise.all([...all, 'sweep' as const].map((r) => roles.start(r)));

  // Bursts of FLOPs, each followed by a kill a few hundred milliseconds later, so the kills land
  // while the roles have work in hand (small groups and batches make many transactions per burst).
  const rounds = Math.max(MIN_KILLS + 5, 60);
  const perRound = Math.ceil((MESSAGES - 1) / rounds);
  const lingering: string[] = [];
  let midWork = 0;
  while (w.messageCount < MESSAGES || roles.kills.length < MIN_KILLS) {
    await w.insertFlops(run.my, Math.min(perRound, MESSAGES - w.messageCount));
    await sleep(rand() * 500);
    const p = await progress(run);
    if (p.open > 0 || p.eventsOpen > 0 || p.enqueued < w.messageCount) midWork++;
    await roles.kill(all[Math.floor(rand() * all.length)]!);
    // A killed worker's backend ends with its socket; a session idle in a transaction for seconds
    // would be a leak of the living ones.
    for (const s of await idleInTransaction(run, 5000)) lingering.push(`${s.app} ${s.pid}: ${s.query}`);
  }
  const killedAt = Date.now();
  await waitFor(() => drained(run, w), { timeoutMs: 120_000, what: 'the run to drain' }).catch(async (err) => {
    throw new Error(`${(err as Error).message}: ${JSON.stringify(await progress(run))}; logs in ${roles.logDir}`);
  });
  const drainMs = Date.now() - killedAt;

  const report = await checkInvariants(run, w);
  const byRole = Object.fromEntries(all.map((r) => [r, roles.kills.filter((k) => k.role === r).length]));
  console.log(
    `[faults:kill] seed ${SEED}: ${w.messageCount} messages, ${roles.kills.length} kills ${JSON.stringify(byRole)} ` +
      `(${midWork} with work in hand), ` +
      `drained ${drainMs} ms after the last kill, ${Math.round((Date.now() - started) / 1000)} s in all; ${JSON.stringify(report.stats)}`,
  );
  expect(roles.crashes).toEqual([]);
  expect(roles.unexplainedFailures()).toEqual([]);
  expect(lingering).toEqual([]);
  // The kills must land while there is work in hand, or they prove nothing about recovery.
  expect(midWork).toBeGreaterThanOrEqual(MIN_KILLS);
  expect(report.violations).toEqual([]);
  expect(roles.kills.length).toBeGreaterThanOrEqual(MIN_KILLS);
  for (const r of all) expect(byRole[r]).toBeGreaterThan(0);
});
