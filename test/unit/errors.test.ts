import { describe, expect, it } from 'vitest';
import { asMsgxError, CodecError, InfraError, isOutage, NotReadyError, ProgrammingError, ProtocolError } from '../../lib/shared/errors.ts';

const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

/**
 * How a foreign error is classed (README "Operations", Errors): a bug is the message's failure, not
 * retried; an outage spends no attempt; any other driver error is INFRA, counted. Red before the
 * change: every case below came back as a counted InfraError.
 */
describe('asMsgxError', () => {
  it.each([
    ['TypeError', new TypeError("Cannot read properties of undefined (reading 'FLID')")],
    ['RangeError', new RangeError('Invalid time value')],
    ['ReferenceError', new ReferenceError('flight is not defined')],
    ['SyntaxError', new SyntaxError('Unexpected token } in JSON')],
  ])('a %s is a programming error: not retried, the cause kept with its stack', (_name, err) => {
    const e = asMsgxError(err);
    expect(e).toBeInstanceOf(ProgrammingError);
    expect(e).toMatchObject({ errorClass: 'UNSUPPORTED', retriable: false, countsAttempt: true });
    expect(e.message).toBe(`programming error (not retried; replay once fixed): ${err.name}: ${err.message}`);
    expect(e.cause).toBe(err);
    expect((e.cause as Error).stack).toContain(err.name);
  });

  it('while decoding it is CODEC_ERROR (the codec is at fault)', () => {
    expect(asMsgxError(new TypeError('x'), 'decode')).toMatchObject({ errorClass: 'CODEC_ERROR', retriable: false });
  });

  it.each([
    ['a lost PostgreSQL connection (08006)', coded('terminating connection', '08006')],
    ['an administrator shutdown (57P01)', coded('terminating connection due to administrator command', '57P01')],
    ['too many connections (53300)', coded('sorry, too many clients already', '53300')],
    ['a refused socket', coded('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a reset socket', coded('read ECONNRESET', 'ECONNRESET')],
    ['pg without a code', new Error('Connection terminated unexpectedly')],
    ['mysql2 lost connection', coded('Connection lost: The server closed the connection.', 'PROTOCOL_CONNECTION_LOST')],
    ['an outage wrapped as a cause', new Error('flush failed', { cause: coded('x', 'ECONNRESET') })],
  ])('%s is an outage: INFRA, retried, no attempt counted', (_what, err) => {
    expect(isOutage(err)).toBe(true);
    const e = asMsgxError(err);
    expect(e).toBeInstanceOf(NotReadyError);
    expect(e).toMatchObject({ errorClass: 'INFRA', retriable: true, countsAttempt: false });
  });

  it.each([
    ['a RAISE in a trigger (P0001)', coded('flight store unavailable (maintenance)', 'P0001')],
    ['a unique violation (23505)', coded('duplicate key value violates unique constraint', '23505')],
    ['a statement timeout (57014)', coded('canceling statement due to statement timeout', '57014')],
    ['a plain Error', new Error('something else')],
    ['a thrown string', 'boom'],
  ])('%s is INFRA and counts an attempt', (_what, err) => {
    const e = asMsgxError(err);
    expect(e).toBeInstanceOf(InfraError);
    expect(e).not.toBeInstanceOf(NotReadyError);
    expect(e).toMatchObject({ errorClass: 'INFRA', retriable: true, countsAttempt: true });
  });

  it('our own errors pass through unchanged', () => {
    const p = new ProtocolError('CNT 2, 1 present');
    const c = new CodecError('bad');
    expect(asMsgxError(p)).toBe(p);
    expect(asMsgxError(c)).toBe(c);
    expect(isOutage(new InfraError('x'))).toBe(false);
    expect(isOutage(new NotReadyError('waiting'))).toBe(true);
  });
});
