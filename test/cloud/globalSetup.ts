import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { TestProject } from 'vitest/node';
import { reservablePort } from '../helpers/freePort.ts';
import { type CloudAssembly, synthStage } from './emulator/synth.ts';
import { OPERATOR_ROLE_ARN } from './outside.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    cloudAssembly: CloudAssembly;
  }
}

/**
 * The cloud tier synthesizes the dev stage once per run (the real `cdk synth`, 1-3 minutes on two
 * cores) and every test file deploys that assembly into an emulated cloud of its own. While
 * working on the tier, MSGX_CLOUD_ASSEMBLY=<file> keeps one synth across runs: written by the
 * first run, reused by the next ones (delete the file after changing infra-cdk/, lib/ or functions/).
 */
export default async function setup(project: TestProject): Promise<() => void> {
  const keep = process.env.MSGX_CLOUD_ASSEMBLY;
  if (keep && existsSync(keep)) {
    project.provide('cloudAssembly', JSON.parse(readFileSync(keep, 'utf8')) as CloudAssembly);
    return () => {};
  }
  // The producers' check-back endpoint a journey runs: a site setting of the deploy, bound only
  // minutes later, so from outside the ephemeral range (an outgoing connection took one in CI).
  const checkPort = await reservablePort();
  // Site settings of the deploy: the producers' check-back origin, the topic they may name, the operators.
  const assembly = await synthStage('dev', {
    context: {
      txCheckAllowedOrigins: `http://127.0.0.1:${checkPort}`,
      txTopics: `msgx.cloud.orders.${Date.now().toString(36)}`,
      operatorPrincipals: OPERATOR_ROLE_ARN,
    },
    // A msgx setting of the stage, as an operator writes it in cdk.json (a journey checks it took effect).
    stageSettings: { env: { MSGX_MAX_BODY_BYTES: 48 * 1024 } },
  });
  project.provide('cloudAssembly', assembly);
  if (keep) {
    writeFileSync(keep, JSON.stringify(assembly));
    return () => {};
  }
  return () => rmSync(dirname(assembly.outdir), { recursive: true, force: true });
}
