import { readFileSync } from 'node:fs';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../infra-cdk/build.ts';
import { functionEntry } from '../../infra-cdk/bundle.ts';
import { FUNCTION_ROLES, isScheduledRole, ROLE_CATALOGUE, SCHEDULED_ROLES } from '../../lib/app/catalogue.ts';
import { loadRoleFactory, localPorts, localRole } from '../../lib/app/localRoles.ts';
import { emfMetricsSink, localMetricsSink } from '../../lib/app/metrics.ts';
import { catalogueRole } from '../../lib/app/role.ts';
import type { Db } from '../../lib/db/db.ts';
import type { Mailbox } from '../../lib/mailbox/mailbox.ts';
import { makeContext } from '../helpers/pipeline.ts';

/**
 * The role catalogue (lib/app/catalogue.ts) names each role's code by a path, so that infra can
 * read it without loading runtime code: these checks are what tsc cannot do for a path.
 */
describe('the role catalogue', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'msgx-catalogue-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
  // Building a role only captures the context; nothing here touches a database.
  const ctx = makeContext({ db: {} as Db, mailbox: {} as Mailbox, env: { MSGX_DATA_DIR: dataDir } });

  it('names, for every role, a module in lib/ whose export builds a role of that name', async () => {
    expect(SCHEDULED_ROLES).toEqual(expect.arrayContaining(['poller', 'pump', 'dispatcher', 'sweep']));
    for (const name of SCHEDULED_ROLES) {
      const { module } = ROLE_CATALOGUE[name].step;
      expect(module, name).toMatch(/^lib\/[a-z]+\/[A-Za-z]+\.ts$/);
      expect(existsSync(join(REPO_ROOT, module)), module).toBe(true);
      const ports = localPorts();
      const spec = catalogueRole(ctx, name, await loadRoleFactory(name), ports);
      expect(spec.role).toBe(name);
      expect(typeof spec.step).toBe('function');
      expect(spec.unlocked, name).toBeUndefined(); // every role today runs under its lock
      await ports.close();
    }
  });

  it('refuses a factory filed under another role’s name (it would take that role’s lock)', async () => {
    const pump = await loadRoleFactory('pump');
    expect(() => catalogueRole(ctx, 'poller', pump, localPorts())).toThrow(/catalogue role poller: its factory built role "pump"/);
  });

  it('gives the dispatcher its sink and closes what it opened with the process', async () => {
    let outboxMetrics = 0;
    const closed: string[] = [];
    const ports = {
      metrics: { ...localMetricsSink, outbox: () => (outboxMetrics++, localMetricsSink.outbox()) },
      onClose: (c: () => Promise<void>) => closed.push(typeof c),
    };
    const spec = catalogueRole(ctx, 'dispatcher', await loadRoleFactory('dispatcher'), ports);
    expect(outboxMetrics).toBe(1);
    expect(closed).toEqual(['function']);
    // Lambda flushes a role's measurements at the start and end of every invocation.
    expect(spec.flush).toBeTypeOf('function');
  });

  it('emits the pipeline gauges only where the sink takes them (Lambda, not the twin)', async () => {
    expect(emfMetricsSink.pipelineGauges).toBeTypeOf('function');
    expect(localMetricsSink.pipelineGauges).toBeUndefined();
    const inLambda = catalogueRole(ctx, 'sweep', await loadRoleFactory('sweep'), { metrics: emfMetricsSink, onClose: () => {} });
    const inTwin = await localRole(ctx, 'sweep', localPorts());
    expect(inLambda.flush).toBeTypeOf('function');
    // The twin's sweep flushes only what its check-back left running: its sink takes no gauges.
    await expect(inTwin.flush!()).resolves.toBeUndefined();
  });

  it("gives every function its thin entry functions/<name>.ts; a scheduled role's names the step its catalogue entry does", () => {
    expect(FUNCTION_ROLES).toEqual(['ingress', ...SCHEDULED_ROLES, 'migrate']);
    for (const fn of FUNCTION_ROLES) {
      const entry = functionEntry(REPO_ROOT, fn);
      expect(entry).toEqual({ file: join(REPO_ROOT, 'functions', `${fn}.ts`) });
      const source = readFileSync(entry.file, 'utf8');
      if (!isScheduledRole(fn)) continue;
      const { module, export: exported } = ROLE_CATALOGUE[fn].step;
      expect(source).toContain(`import { ${exported} } from '../${module}';`);
      expect(source).toContain(`export const handler = roleHandler('${fn}', ${exported});`);
    }
  });
});
