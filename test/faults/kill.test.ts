import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitFor } from '../helpers/services.ts';
import {
  checkInvariants,
  drained,
  feed,
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
 * (at least 50 kills), each restarted at once. Afterwards: no message lost or processed twice,
 * per-FLID order kept on both topics once duplicates are dropped, no idle-in-transaction session.
 */
const MESSAGES = Number(process.env.FAULTS_MESSAGES ?? 5000);
const MIN_KILLS = Number(process.env.FAULTS_KILLS ?? 50);
const SEED = Number(process.env.FAULTS_SEED ?? Date.now() % 1_000_000);

let run: FaultRun;
let roles: RoleProcesses;
beforeAll(async () => {
  run = await setupRun('kill');
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
  await Promise.all(all.map((r) => roles.start(r)));

  // Feed the FLOPs over about a minute so kills land while every role has work in hand.
  const feeding = feed(w, run.my, MESSAGES - 1, 90);
  let fed = false;
  void feeding.done.then(() => (fed = true));
  const lingering: string[] = [];
  while (roles.kills.length < MIN_KILLS || !fed) {
    await sleep(200 + rand() * 1300);
    const role = all[Math.floor(rand() * all.length)]!;
    await roles.kill(role);
    // A killed worker's backend ends with its socket; a session idle in a transaction for seconds
    // would be a leak of the living ones.
    for (const s of await idleInTransaction(run, 5000)) lingering.push(`${s.app} ${s.pid}: ${s.query}`);
  }
  await feeding.done;
  const killedAt = Date.now();
  await waitFor(() => drained(run, w), { timeoutMs: 120_000, what: `the run to drain (${JSON.stringify(await progress(run))})` });
  const drainMs = Date.now() - killedAt;

  const report = await checkInvariants(run, w);
  const byRole = Object.fromEntries(all.map((r) => [r, roles.kills.filter((k) => k.role === r).length]));
  console.log(
    `[faults:kill] seed ${SEED}: ${w.messageCount} messages, ${roles.kills.length} kills ${JSON.stringify(byRole)}, ` +
      `drained ${drainMs} ms after the last kill, ${Math.round((Date.now() - started) / 1000)} s in all; ${JSON.stringify(report.stats)}`,
  );
  expect(lingering).toEqual([]);
  expect(report.violations).toEqual([]);
  expect(roles.kills.length).toBeGreaterThanOrEqual(MIN_KILLS);
  for (const r of all) expect(byRole[r]).toBeGreaterThan(0);
});
