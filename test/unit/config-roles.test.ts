import { describe, expect, it } from 'vitest';
import { SCHEDULED_ROLES } from '../../lib/app/catalogue.ts';
import { loadConfig, SWITCHABLE_ROLES } from '../../lib/config/config.ts';
import { roleMetricValues } from '../../lib/jobs/roleMetrics.ts';

/** The role switches (README "Roles and start"). Red before: MSGX_DISABLED_ROLES and MSGX_START_PAUSED did not exist. */
describe('MSGX_DISABLED_ROLES and MSGX_START_PAUSED', () => {
  it('name exactly the catalogue roles (config imports no domain, so it writes them out)', () => {
    expect([...SWITCHABLE_ROLES]).toEqual(SCHEDULED_ROLES);
  });

  it('default: every role runs, and a start does not pause', () => {
    expect(loadConfig({}).roles).toEqual({ disabled: [], startPaused: false });
  });

  it('takes a comma list of roles (once each) and the flag', () => {
    expect(loadConfig({ MSGX_DISABLED_ROLES: 'dispatcher, sweep,dispatcher', MSGX_START_PAUSED: '1' }).roles).toEqual({
      disabled: ['dispatcher', 'sweep'],
      startPaused: true,
    });
  });

  it.each(['ingress', 'migrate', 'pumps', 'Pump'])('refuses %s, naming the roles that can be switched off', (role) => {
    expect(() => loadConfig({ MSGX_DISABLED_ROLES: `poller,${role}` })).toThrow(
      /MSGX_DISABLED_ROLES: must be a comma list of roles to switch off, each one of poller, pump, dispatcher, sweep/,
    );
  });

  it('a run of a switched-off role reports Disabled, not a missing heartbeat or a lock taken by another', () => {
    const summary = { role: 'sweep', acquired: false, steps: 0, busySteps: 0, pausedSteps: 0, errors: 0, stoppedBy: 'disabled' } as const;
    expect(roleMetricValues(summary)).toEqual({ Heartbeat: 0, RoleLockTaken: 0, Disabled: 1 });
  });
});
