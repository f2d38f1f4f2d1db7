import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PRIVATE_PG_MAX_CONNECTIONS } from '../../helpers/privatePg.ts';

const run = promisify(execFile);

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The mailbox the deploy is pointed at: the site settings `cdk deploy` needs (README). */
export const MAILBOX_SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:cmin/mailbox-Cloud1';

export interface CloudAssembly {
  /** The cdk.out folder. */
  outdir: string;
  stage: string;
  /** Kafka topic names given to the synth (unique per run: the broker is shared). */
  topics: { msg: string; schd: string };
  /** The context given to `cdk synth` on its command line (the site settings). */
  context: Record<string, string>;
  /** What was merged over cdk.json's `stages.<stage>` for this synth (per-stage settings), if anything. */
  stageSettings?: Record<string, unknown>;
}

/**
 * `cdk synth` as an operator runs it before `cdk deploy`: the real CDK CLI in a child process, the
 * stage's settings from cdk.json, the site settings on the command line, into a folder of its own.
 * The runtime's AWS SDK is placed beside the folder (node_modules/@aws-sdk), where a bundle's
 * external `@aws-sdk/*` imports find it, as they find the runtime's copy in Lambda.
 */
export async function synthStage(
  stage: string,
  o: { runId?: string; context?: Record<string, string>; stageSettings?: Record<string, unknown> } = {},
): Promise<CloudAssembly> {
  const root = mkdtempSync(join(tmpdir(), 'msgx-cloud-'));
  const outdir = join(root, 'cdk.out');
  const runId = o.runId ?? `${Date.now().toString(36)}${process.pid.toString(36)}`;
  const topics = { msg: `msgx.msg.cloud${runId}`, schd: `msgx.schd.cloud${runId}` };
  const context = {
    stage,
    mailboxHost: 'localhost',
    mailboxSecretArn: MAILBOX_SECRET_ARN,
    topicMsg: topics.msg,
    topicSchd: topics.schd,
    ...o.context,
  };
  // The run's own offsets topic: the exactly-once cursors in the shared broker's default topic are
  // an earlier run's, and a fresh database adopting them would skip its first events.
  // The emulated instance's max_connections, as a platform team states it for a database of its own:
  // the ingress's reserved concurrency is sized to it (infra-cdk/config.ts connectionBudget).
  const stageSettings = merge(
    { env: { MSGX_TOPIC_OFFSETS: `msgx.offsets.cloud${runId}` }, db: { maxConnections: PRIVATE_PG_MAX_CONNECTIONS } },
    o.stageSettings ?? {},
  ) as Record<string, unknown>;
  const args = ['synth', '--quiet', '--no-notices', '-o', outdir, ...Object.entries(context).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  try {
    await run(join(REPO, 'node_modules', '.bin', 'cdk'), args, {
      cwd: projectWith(root, stage, stageSettings),
      maxBuffer: 64 << 20,
      timeout: 600_000,
    });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`cdk synth failed: ${e.message}\n${e.stderr ?? ''}${e.stdout ?? ''}`.slice(0, 8000));
  }
  mkdirSync(join(root, 'node_modules'));
  symlinkSync(join(REPO, 'node_modules', '@aws-sdk'), join(root, 'node_modules', '@aws-sdk'));
  return { outdir, stage, topics, context, ...(o.stageSettings ? { stageSettings: o.stageSettings } : {}) };
}

/**
 * A project folder whose cdk.json is the repository's with `stages.<stage>` edited as an operator
 * edits it (`settings` merged over it), running the repository's app: per-stage settings (cdk.json
 * objects) cannot be given with `-c`, which sets strings.
 */
function projectWith(root: string, stage: string, settings: Record<string, unknown>): string {
  const dir = join(root, 'project');
  mkdirSync(dir);
  const cdkJson = JSON.parse(readFileSync(join(REPO, 'cdk.json'), 'utf8')) as { app: string; context: { stages: Record<string, unknown> } };
  cdkJson.context.stages[stage] = merge(cdkJson.context.stages[stage], settings);
  cdkJson.app = `${join(REPO, 'node_modules', '.bin', 'tsx')} --tsconfig ${join(REPO, 'tsconfig.json')} ${join(REPO, 'infra-cdk', 'app.ts')}`;
  writeFileSync(join(dir, 'cdk.json'), JSON.stringify(cdkJson, null, 2));
  return dir;
}

function merge(base: unknown, over: unknown): unknown {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = merge(base[k], v);
  return out;
}

/** The templates of one stage's stacks (`Msgx-<stage>-*.template.json`), by stack name. */
export function readTemplates(a: CloudAssembly): Map<string, Template> {
  const out = new Map<string, Template>();
  const prefix = `Msgx-${a.stage}-`;
  for (const f of readdirSync(a.outdir))
    if (f.startsWith(prefix) && f.endsWith('.template.json'))
      out.set(f.slice(0, -'.template.json'.length), JSON.parse(readFileSync(join(a.outdir, f), 'utf8')) as Template);
  if (out.size === 0) throw new Error(`no ${prefix}*.template.json in ${a.outdir}`);
  return out;
}

/** The folder CDK wrote for an S3 key of a template (from the stack's asset manifest). */
export function assetDir(a: CloudAssembly, stack: string, s3Key: string): string {
  const manifest = JSON.parse(readFileSync(join(a.outdir, `${stack}.assets.json`), 'utf8')) as {
    files: Record<string, { source: { path: string; packaging?: string }; destinations: Record<string, { objectKey: string }> }>;
  };
  const hits = Object.values(manifest.files).filter((f) => Object.values(f.destinations).some((d) => d.objectKey === s3Key));
  if (hits.length !== 1) throw new Error(`${stack}: asset manifest has ${hits.length} entries for S3 key ${s3Key}`);
  const { path, packaging } = hits[0]!.source;
  if (packaging !== 'zip') throw new Error(`${stack}: asset ${s3Key} is packaged as ${packaging}, not a zipped folder`);
  const dir = join(a.outdir, path);
  if (!existsSync(dir)) throw new Error(`${stack}: asset folder ${dir} is missing`);
  return dir;
}

export interface Resource {
  Type: string;
  Properties?: Record<string, unknown>;
  DependsOn?: string | string[];
}

export interface Template {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, { Value: unknown; Export?: { Name: unknown } }>;
  Mappings?: Record<string, Record<string, Record<string, unknown>>>;
  Parameters?: Record<string, { Default?: unknown }>;
}
