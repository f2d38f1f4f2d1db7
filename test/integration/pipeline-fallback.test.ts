import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgMailbox } from '../../lib/mailbox/pg.ts';
import { pumpOnce } from '../../lib/pipeline/pump.ts';
import { FakeClock } from '../../lib/shared/clock.ts';
import { defaultRegistry } from '../../lib/app/registry.ts';
import { flight, flop, schd } from '../fixtures/messages/build.ts';
import { drainPoller, drainPump, makeContext } from '../helpers/pipeline.ts';
import { freshPg, type TestPg } from '../helpers/services.ts';

/**
 * Flight writes are deferred to the end of a pump group. When such a write fails there, the
 * group is applied again message by message, so only the message whose write fails is FAILED —
 * with its own identity and class — and nothing behind it moves.
 */
describe('a deferred write that fails at the end of a group', () => {
  let pg: TestPg;
  beforeAll(async () => {
    pg = await freshPg();
  });
  afterAll(() => pg.drop());

  it('fails only the message whose write fails; earlier ones in the group commit', async () => {
    const mailbox = new PgMailbox(pg.db);
    await mailbox.ensureTables();
    const ctx = makeContext({ db: pg.db, mailbox, clock: new FakeClock(), registry: defaultRegistry() });
    const flights = ['A1', 'B2', 'C3'].map((f) => flight({ FLID: f, OPDY: '20261129', FLNO: f }));
    await mailbox.insertInbound(schd('DNLD', { seqn: 1, dttm: '20261129000000', opdy: '20261129', flights }));
    await drainPoller(ctx);
    await drainPump(ctx);
    // Flight B2 becomes unwritable: its FLOP fails in the database, at the group's deferred write.
    await pg.db.query(`CREATE FUNCTION refuse_b2() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.flid = 'B2' THEN RAISE EXCEPTION 'flight B2 is locked for maintenance'; END IF; RETURN NEW; END $$`);
    await pg.db.query(`CREATE TRIGGER refuse_b2 BEFORE UPDATE ON flight_schd FOR EACH ROW EXECUTE FUNCTION refuse_b2()`);
    const ids = [];
    for (const [i, f] of ['A1', 'B2', 'C3'].entries())
      ids.push(
        await mailbox.insertInbound(flop('ETOT', { seqn: 10 + i, dttm: '20261129010000' }, flight({ FLID: f, ETOT: '20261129101500' }))),
      );
    await drainPoller(ctx);

    const step = await pumpOnce(ctx);
    expect(step).toMatchObject({ kind: 'processed', count: 2, stopped: true });
    const rows = await pg.db.query<{
      msg_id: number;
      status: string;
      error_class: string | null;
      error_detail: string | null;
      identity_key: string | null;
    }>(`SELECT msg_id, status, error_class, error_detail, identity_key FROM proc_state WHERE msg_id = ANY($1::bigint[]) ORDER BY msg_id`, [
      ids,
    ]);
    expect(rows.rows.map((r) => [r.status, r.error_class])).toEqual([
      ['SUCCEEDED', null],
      ['FAILED', 'INFRA'],
      ['PENDING', null],
    ]);
    expect(rows.rows[1]!.error_detail).toMatch(/flight B2 is locked for maintenance/);
    expect(rows.rows[1]!.identity_key).toBe('FIMS|FLOP|ETOT|11');
    const versions = await pg.db.query<{ flid: string; state_version: number }>(
      `SELECT flid, state_version FROM flight_schd ORDER BY flid`,
    );
    expect(versions.rows).toEqual([
      { flid: 'A1', state_version: 2 },
      { flid: 'B2', state_version: 1 },
      { flid: 'C3', state_version: 1 },
    ]);
  });
});
