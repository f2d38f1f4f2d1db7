import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundleBytes, bundleFunction, MAX_BUNDLE_BYTES } from '../../infra-cdk/bundle.ts';
import { FUNCTION_ROLES, isScheduledRole } from '../../lib/app/catalogue.ts';
import { BUDGET_MARGIN_MS } from '../../lib/jobs/coldStart.ts';
import { tryRoleLock } from '../../lib/jobs/roleLock.ts';
import { ensureTopics } from '../../lib/outbox/topics.ts';
import { fakeLambda, fakeSecretsExtension } from '../../test/helpers/fakeAws.ts';
import { benchContext, freshMysql, freshPg, randomName, serviceUrls } from '../lib/env.ts';
import { progress } from '../lib/progress.ts';
import { figure, type Figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';
import { median } from '../lib/stats.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '..', '..');
const out = join(root, 'bench', '.out', 'lambda');
const FUNCTIONS = FUNCTION_ROLES;
/** Issue 14: each function at most 1 MB minified, imported in at most 100 ms. */
const MAX_IMPORT_MS = 100;
const SIGNING_ARN = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:msgx/bench/signing-AbCdEf';

/** A fresh `node` importing the bundle (as a Lambda cold start does): ms around the import. */
async function coldImport(file: string): Promise<number> {
  const code = `const t = performance.now(); await import(${JSON.stringify(file)}); process.stdout.write(String(performance.now() - t)); process.exit(0);`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], { cwd: out, env: { PATH: process.env.PATH ?? '' } });
  return Number(stdout);
}

/**
 * The Lambda runtime, minimally, for one cold start: import the bundle, invoke the handler twice
 * (the second is a warm invocation), report wall and CPU ms of each part. A scheduled role gets
 * the stop margin plus 200 ms (a short loop); the ingress a stored message (status 200 checked).
 */
const INVOKE = `
const [file, kind] = process.argv.slice(2);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
let seq = 0;
const send = () => ({ httpMethod: 'POST', path: '/cminmsgs/send', headers: { 'content-type': 'application/xml' }, isBase64Encoded: false, queryStringParameters: null, requestContext: {},
  body: '<MSG><META><SNDR>FIMS</SNDR><RCVR>MSGX</RCVR><SEQN>cold-' + process.pid + '-' + (seq++) + '</SEQN><TYPE>LDM</TYPE></META></MSG>' });
const t0 = performance.now(), c0 = cpu();
const { handler } = await import(file);
const t1 = performance.now(), c1 = cpu();
const call = async () => {
  if (kind === 'ingress') {
    const r = await handler(send());
    if (r.statusCode !== 200) throw new Error('ingress answered ' + r.statusCode + ' ' + r.body);
  } else if (kind === 'migrate') await handler();
  else await handler({}, { getRemainingTimeInMillis: () => ${BUDGET_MARGIN_MS} + 200 });
};
await call();
const t2 = performance.now(), c2 = cpu();
await call();
const t3 = performance.now(), c3 = cpu();
process.stdout.write(JSON.stringify({ importMs: t1 - t0, firstMs: t2 - t1, warmMs: t3 - t2, importCpu: c1 - c0, firstCpu: c2 - c1, warmCpu: c3 - c2 }));
process.exit(0);
`;

interface ColdRun {
  importMs: number;
  firstMs: number;
  warmMs: number;
  importCpu: number;
  firstCpu: number;
  warmCpu: number;
}

async function coldStart(file: string, kind: string, env: Record<string, string>): Promise<ColdRun> {
  const { stdout } = await run(process.execPath, [join(out, 'invoke.mjs'), file, kind], {
    cwd: out,
    env: { PATH: process.env.PATH ?? '', ...env },
    maxBuffer: 1 << 24,
  });
  // Powertools writes EMF metrics to stdout as well: the measurement is the last line.
  return JSON.parse(stdout.trim().split('\n').pop()!) as ColdRun;
}

const fmt = (xs: number[]) => xs.map((t) => t.toFixed(0)).join(', ');

/**
 * `npm run bench -- --only bundle`: the Lambda bundles exactly as `cdk synth` builds them
 * (infra-cdk/bundle.ts, target node22, without the twin's code), their size, their cold import,
 * and — because code left out of the import may still be loaded by the first invocation — the
 * whole cold start: import plus what the first invocation spends beyond a warm one (against the
 * local PostgreSQL, MariaDB and Kafka, with stand-ins for the secrets extension and Lambda).
 */
export async function bundleScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('bundle');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'invoke.mjs'), INVOKE);
  const figures: Figure[] = [];
  const imports = o.quick ? 5 : 9;
  const starts = o.quick ? 3 : 5;
  const files = new Map<string, string>();
  const sizes: Record<string, { total: number; index: number }> = {};
  for (const fn of FUNCTIONS) {
    const outdir = join(out, fn);
    await bundleFunction({ repoRoot: root, fn, outdir, target: 'node22', sourcemap: false });
    const file = join(outdir, 'index.mjs');
    files.set(fn, file);
    const bytes = (sizes[fn] = bundleBytes(outdir));
    figures.push(
      figure(`bundle.size.${fn}`, `${fn}: bundle, all JavaScript (minified)`, 'KB', [bytes.total / 1000], {
        target: { op: '<', value: MAX_BUNDLE_BYTES / 1000 + 0.001 },
        headline: fn === 'ingress',
        note: `index.mjs ${(bytes.index / 1000).toFixed(0)} KB, chunks ${((bytes.total - bytes.index) / 1000).toFixed(0)} KB`,
      }),
    );
    const times: number[] = [];
    for (let i = 0; i < imports; i++) times.push(await coldImport(file));
    figures.push(
      figure(`bundle.import.${fn}`, `${fn}: cold import of index.mjs (median of ${imports})`, 'ms', times, {
        target: { op: '<', value: MAX_IMPORT_MS + 0.001 },
        note: `runs ${fmt(times)}; min ${Math.min(...times).toFixed(0)} (the quiet-machine estimate)`,
      }),
    );
    p.step(
      'import',
      `${fn}: ${(bytes.total / 1000).toFixed(0)} KB, import median ${median(times).toFixed(0)} ms, min ${Math.min(...times).toFixed(0)} ms`,
    );
  }

  // The whole cold start, on the local services. Secrets: the signing secret through a stand-in of
  // the extension (the databases by URL: the shared servers have no TLS, which a URL from a
  // secret requires). The ingress kicks through a stand-in of the Lambda API when no pump is live.
  const pg = await freshPg();
  const my = await freshMysql();
  const store = { values: new Map([[SIGNING_ARN, 'bench-signing-key-0123456789abcdef']]) };
  const ext = await fakeSecretsExtension(store);
  const lambda = await fakeLambda();
  const env: Record<string, string> = {
    MSGX_PG_URL: pg.url,
    MSGX_MAILBOX_URL: my.url,
    MSGX_KAFKA_BROKERS: serviceUrls().kafkaBrokers.join(','),
    MSGX_TOPIC_MSG: randomName('bench.msg'),
    MSGX_TOPIC_SCHD: randomName('bench.schd'),
    // A deployment's own offsets topic, as its msg and schd: a shared one grows with every run.
    MSGX_TOPIC_OFFSETS: randomName('bench.offsets'),
    MSGX_LOG_LEVEL: 'ERROR',
    MSGX_SIGNING_SECRET_ARN: SIGNING_ARN,
    PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(ext.port),
    AWS_SESSION_TOKEN: ext.token,
    MSGX_PUMP_FUNCTION_NAME: 'msgx-bench-pump',
    MSGX_POLLER_FUNCTION_NAME: 'msgx-bench-poller',
    AWS_ENDPOINT_URL_LAMBDA: lambda.endpoint,
    AWS_REGION: 'eu-west-1',
    AWS_ACCESS_KEY_ID: 'AKIDBENCH',
    AWS_SECRET_ACCESS_KEY: 'bench',
    POWERTOOLS_METRICS_NAMESPACE: 'msgx',
    POWERTOOLS_SERVICE_NAME: 'msgx',
    // As the function's environment sets it (/var/task/migrations beside the bundle).
    MSGX_MIGRATIONS_DIR: join(root, 'migrations'),
  };
  const detail: Record<string, ColdRun[]> = {};
  try {
    await ensureTopics(benchContext({ db: pg.db, mailbox: my.mailbox, env }).config);
    const cases: { id: string; fn: string; kind: string; label: string; live?: boolean }[] = [
      { id: 'ingress', fn: 'ingress', kind: 'ingress', label: 'ingress (a send; pump and poller live)', live: true },
      { id: 'ingress-kick', fn: 'ingress', kind: 'ingress', label: 'ingress (a send that starts pump and poller)' },
      ...FUNCTIONS.filter((f) => f !== 'ingress').map((fn) => ({ id: fn, fn, kind: isScheduledRole(fn) ? 'scheduled' : fn, label: fn })),
    ];
    for (const c of cases) {
      // "Live": this process holds the roles' locks, so the ingress finds them running.
      const locks = c.live ? [await tryRoleLock(pg.db, 'pump'), await tryRoleLock(pg.db, 'poller')] : [];
      const runs: ColdRun[] = [];
      try {
        for (let i = 0; i < starts; i++) runs.push(await coldStart(files.get(c.fn)!, c.kind, env));
      } finally {
        for (const l of locks) await l?.release();
      }
      detail[c.id] = runs;
      const init = runs.map((r) => r.firstMs - r.warmMs);
      const total = runs.map((r) => r.importMs + r.firstMs - r.warmMs);
      const cpu = runs.map((r) => r.importCpu + r.firstCpu - r.warmCpu);
      figures.push(
        figure(`bundle.firstinit.${c.id}`, `${c.label}: first invocation beyond a warm one (median of ${starts})`, 'ms', init, {
          better: 'lower',
          note: `runs ${fmt(init)}; CPU ${fmt(runs.map((r) => r.firstCpu - r.warmCpu))} ms`,
        }),
        figure(`bundle.start.${c.id}`, `${c.label}: cold start = import + that (median of ${starts})`, 'ms', total, {
          better: 'lower',
          note: `runs ${fmt(total)}; min ${Math.min(...total).toFixed(0)}; CPU ${fmt(cpu)} ms`,
        }),
      );
      p.step('start', `${c.label}: import ${fmt(runs.map((r) => r.importMs))} + first-invocation init ${fmt(init)} ms`);
    }
  } finally {
    await ext.close();
    await lambda.close();
    await my.drop();
    await pg.drop();
  }
  return {
    scenario: 'bundle',
    title: 'Lambda bundles: size, cold import and cold start (target: ≤ 1 MB, import ≤ 100 ms each)',
    figures,
    notes: [
      `bundled with infra-cdk/bundle.ts (the CDK's definition), node22, no source maps; cold import = a fresh node ${process.version} process importing index.mjs (the chunks it does not import are not loaded), median of ${imports}; min = the quiet-machine estimate.`,
      `cold start = import + (first invocation − second invocation) in one fresh process, ${starts} processes per case, on the local services: what the first invocation still loads or builds (chunks, the AWS SDK Lambda client when it kicks, the configuration, connections to PostgreSQL, MariaDB and Kafka) is counted. A scheduled role runs a 200 ms loop each time.`,
    ],
    meta: { functions: FUNCTIONS, maxBytes: MAX_BUNDLE_BYTES, maxImportMs: MAX_IMPORT_MS, sizes, coldStarts: detail },
  };
}
