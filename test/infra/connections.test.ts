import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it, vi } from 'vitest';
import { synth } from './synth.ts';
import { CONNECTION_BUDGET, connectionBudget, defaultMaxConnections, type FunctionRole } from '../../infra-cdk/config.ts';
import type { MsgxStacks } from '../../infra-cdk/build.ts';

// Synthesizing five stacks takes seconds alone and minutes on a shared, loaded machine.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 600_000 });

const reserved = (s: MsgxStacks, role: FunctionRole): unknown =>
  Template.fromStack(s.service).toJSON().Resources[s.service.getLogicalId(s.service.functions[role].fn.node.defaultChild as never)]
    .Properties.ReservedConcurrentExecutions;

describe('connection budget: the ingress reserved to what PostgreSQL holds', () => {
  it('sets aside superuser slots, a lock holder per scheduled role, the migrator and an operator; divides the rest by a pool', () => {
    // Each figure counted by hand from the code's numbers: 3 superuser slots; 4 scheduled roles × (pool 3 +
    // lock session + LISTEN); migrator pool 2; CLI pool 2; an ingress environment's pool 3.
    expect(CONNECTION_BUDGET).toEqual({ superuserReserved: 3, perScheduledRole: 5, migrate: 2, operator: 2, perIngress: 3 });
    expect(connectionBudget(40)).toEqual({ maxConnections: 40, setAside: 27, ingressMax: 4 });
    expect(connectionBudget(112).ingressMax).toBe(28);
    // RDS's LEAST(DBInstanceClassMemory / 9531392, 5000) from the nominal memory.
    expect(defaultMaxConnections('t4g.micro')).toBe(112);
    expect(defaultMaxConnections('db.m7g.large')).toBe(901);
    expect(defaultMaxConnections('r7g.16xlarge')).toBe(5000);
    expect(defaultMaxConnections('x2g.large')).toBeUndefined();
  });

  it("derives the ingress's reserved concurrency from the stage's max_connections, capped by the API's burst", () => {
    // Dev as shipped: t4g.micro, 112 connections, 28 ingress environments (the API's burst is 40).
    const dev = synth();
    expect(reserved(dev, 'ingress')).toBe(28);
    // The emulated cloud's instance: 40 connections hold 4.
    const small = synth({ stages: { dev: { db: { maxConnections: 40 } } } });
    expect(reserved(small, 'ingress')).toBe(4);
    // A larger instance: the API lets in no more than its burst at once (dev: 40).
    expect(reserved(synth({ stages: { dev: { db: { instanceType: 't4g.medium' } } } }), 'ingress')).toBe(40);
    // Set by hand, within the budget: as given; the scheduled roles stay unreserved.
    const given = synth({ stages: { dev: { db: { maxConnections: 40 }, functions: { reservedConcurrency: { ingress: 3 } } } } });
    expect(reserved(given, 'ingress')).toBe(3);
    expect(reserved(given, 'pump')).toBeUndefined();
  });

  it('refuses at synth, naming the setting, what the instance cannot hold', () => {
    expect(() => synth({ stages: { dev: { db: { maxConnections: 40 }, functions: { reservedConcurrency: { ingress: 5 } } } } })).toThrow(
      /stages\.dev\.functions\.reservedConcurrency\.ingress 5 exceeds the connection budget: 40 connections \(stages\.dev\.db\.maxConnections\) less 27 set aside .* hold 4 ingress environments of 3/,
    );
    expect(() => synth({ stages: { dev: { db: { maxConnections: 29 } } } })).toThrow(/stages\.dev\.db\.maxConnections 29 is too small/);
    expect(() => synth({ stages: { dev: { db: { maxConnections: 'many' } } } })).toThrow(
      /stages\.dev\.db\.maxConnections must be a positive integer/,
    );
    expect(() => synth({ stages: { dev: { db: { instanceType: 'x2g.large' } } } })).toThrow(
      /stages\.dev\.db\.maxConnections is required for instance class x2g\.large/,
    );
    expect(() => synth({ stages: { dev: { functions: { reservedConcurrency: { ingress: 0 } } } } })).toThrow(
      /stages\.dev\.functions\.reservedConcurrency\.ingress must be a positive integer/,
    );
  });
});
