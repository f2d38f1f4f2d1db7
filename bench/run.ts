/**
 * `npm run bench [-- --quick] [-- --only <scenario>[,<scenario>]] [-- --runs N]`
 * Runs the scenarios one at a time on the local services (progress on stderr), prints a table,
 * writes bench/results/<date>.json and latest.json and draws bench/results/latest.svg.
 * A --only run writes bench/results/only-<names>-<date>.json and leaves latest.* alone.
 */
import { execSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderChart } from './lib/chart.ts';
import type { Figure, RunOptions, ScenarioResult } from './lib/result.ts';
import { ensureServices } from './lib/env.ts';
import { waitForQuiet } from './lib/quiet.ts';
import { renderTable } from './lib/table.ts';
import { bundleScenario } from './scenarios/bundle.ts';
import { cloudScenario } from './scenarios/cloud.ts';
import { decoderScenario } from './scenarios/decoder.ts';
import { e2eScenario } from './scenarios/e2e.ts';
import { footprintScenario } from './scenarios/footprint.ts';
import { gateScenario } from './scenarios/gate.ts';
import { httpScenario } from './scenarios/http.ts';
import { latencyScenario } from './scenarios/latency.ts';
import { peersScenario } from './scenarios/peers.ts';
import { pumpScenario } from './scenarios/pump.ts';
import { relayScenario } from './scenarios/relay.ts';
import { wakeupScenario } from './scenarios/wakeup.ts';

const SCENARIOS: Record<string, (o: RunOptions) => Promise<ScenarioResult>> = {
  e2e: e2eScenario,
  latency: latencyScenario,
  pump: pumpScenario,
  peers: peersScenario,
  wakeup: wakeupScenario,
  relay: relayScenario,
  http: httpScenario,
  footprint: footprintScenario,
  bundle: bundleScenario,
  decoder: decoderScenario,
  gate: gateScenario,
  cloud: cloudScenario,
};

function parseArgs(argv: string[]) {
  const o = { quick: false, only: null as string[] | null, runs: null as number | null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') o.quick = true;
    else if (a === '--only') o.only = (argv[++i] ?? '').split(',').filter(Boolean);
    else if (a.startsWith('--only=')) o.only = a.slice(7).split(',').filter(Boolean);
    else if (a === '--runs') o.runs = Number(argv[++i]);
    else if (a === '--help' || a === '-h') {
      process.stdout.write(`usage: npm run bench [-- --quick] [--only ${Object.keys(SCENARIOS).join('|')}] [--runs N]\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  for (const s of o.only ?? []) if (!SCENARIOS[s]) throw new Error(`unknown scenario ${s}; one of ${Object.keys(SCENARIOS).join(', ')}`);
  return o;
}

const here = dirname(fileURLToPath(import.meta.url));

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const names = args.only ?? Object.keys(SCENARIOS);
  const runs = args.runs ?? (args.quick ? 1 : 3);
  const earlier = new Map<string, Figure>();
  const results: ScenarioResult[] = [];
  const started = Date.now();
  process.stderr.write(`msgx bench: ${names.join(', ')}; ${runs} run(s) each${args.quick ? ' (quick)' : ''}\n`);
  for (const name of names) {
    const t0 = Date.now();
    process.stderr.write(`\n== ${name} ==\n`);
    const before = await waitForQuiet(args.quick ? 0 : 60_000, 0.25, (s) => process.stderr.write(`[${name}] ${s}\n`));
    let r: ScenarioResult;
    try {
      await ensureServices();
      r = await SCENARIOS[name]!({ quick: args.quick, runs, earlier });
    } catch (first) {
      // A shared service restarted under us (fault tests run on the same machine): retry once.
      process.stderr.write(`[${name}] failed (${first instanceof Error ? first.message : String(first)}); services up and one retry\n`);
      try {
        await ensureServices();
        r = await SCENARIOS[name]!({ quick: args.quick, runs, earlier });
        r.notes.push(`first attempt failed (${first instanceof Error ? first.message : String(first)}); this is the retry.`);
      } catch (err) {
        process.stderr.write(`[${name}] FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
        r = {
          scenario: name,
          title: name,
          figures: [],
          notes: [],
          meta: {},
          skipped: `failed: ${err instanceof Error ? err.message : String(err)}`,
        };
      }
    }
    r.seconds = Math.round((Date.now() - t0) / 1000);
    // Other work on the machine while this scenario ran skews every figure: say so with the results.
    r.meta.machineBefore = before;
    r.meta.load1After = Number(loadavg()[0]!.toFixed(2));
    if (before.busyPct > 25)
      r.notes.push(
        `other work used ${before.busyPct}% of the CPUs when this scenario started (load ${before.load1}): figures are pessimistic.`,
      );
    for (const f of r.figures) earlier.set(f.id, f);
    results.push(r);
    process.stderr.write(`[${name}] done in ${r.seconds}s\n`);
  }

  const date = new Date();
  const stamp = date
    .toISOString()
    .replace(/[:]/g, '-')
    .replace(/\.\d+Z$/, 'Z');
  let commit = '';
  try {
    commit = execSync('git rev-parse --short HEAD', { cwd: here, stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {}
  const doc = {
    date: date.toISOString(),
    commit,
    quick: args.quick,
    runs,
    scenarios: names,
    seconds: Math.round((Date.now() - started) / 1000),
    machine: { cpus: cpus().length, cpu: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version },
    results,
  };
  const table = renderTable(results);
  process.stdout.write(`\n${table}\n\n`);
  for (const r of results) for (const note of r.notes) process.stdout.write(`- ${r.scenario}: ${note}\n`);

  const dir = join(here, 'results');
  mkdirSync(dir, { recursive: true });
  const full = !args.only;
  const base = full ? (args.quick ? `quick-${stamp}` : stamp) : `only-${names.join('+')}-${stamp}`;
  writeFileSync(join(dir, `${base}.json`), `${JSON.stringify(doc, null, 2)}\n`);
  const written = [`bench/results/${base}.json`];
  if (full && !args.quick) {
    writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(doc, null, 2)}\n`);
    writeFileSync(
      join(dir, 'latest.svg'),
      renderChart(results, `msgx bench ${date.toISOString().slice(0, 16).replace('T', ' ')} UTC (${commit}, ${doc.machine.cpus} CPUs)`),
    );
    writeFileSync(join(dir, 'latest.md'), `${renderTable(results, true)}\n`);
    written.push('bench/results/latest.json', 'bench/results/latest.svg', 'bench/results/latest.md');
  } else {
    // Smoke and partial runs get their own chart next to their JSON, never over latest.*.
    writeFileSync(
      join(dir, `${base}.svg`),
      renderChart(results, `msgx bench (${full ? 'quick' : names.join(', ')}) ${date.toISOString().slice(0, 16)}`),
    );
    written.push(`bench/results/${base}.svg`);
  }
  process.stdout.write(`\nwritten: ${written.join(', ')} (${doc.seconds}s)\n`);
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
