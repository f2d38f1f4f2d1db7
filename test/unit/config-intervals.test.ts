import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../lib/config/config.ts';
import { ConfigError } from '../../lib/shared/errors.ts';
import { TxValidationError } from '../../lib/txmsg/errors.ts';
import { parsePrepare } from '../../lib/txmsg/validate.ts';

/**
 * Every interval positive, for real: the zeros that used to pass and meant something nobody wants
 * (an ack window of zero, a check-back at once, a daily sweep at a time that never comes).
 * Red on main for each refusal below (they were all accepted).
 */
describe('intervals and times are refused when they cannot work', () => {
  it.each([
    ['0s,1m,0s', /MSGX_TX_REDELIVERY_SCHEDULE: item 3 \("0s"\) must be a positive duration \(the last wait is the ack window/],
    [
      '0s',
      /MSGX_TX_REDELIVERY_SCHEDULE: item 1 \("0s"\) must be a positive duration \(the last wait is the ack window: it cannot be zero\)/,
    ],
    [' 0ms ', /MSGX_TX_REDELIVERY_SCHEDULE: item 1 \("0ms"\)/],
    ['0s,0s,1m', /MSGX_TX_REDELIVERY_SCHEDULE: item 2 \("0s"\) must be a positive duration/],
    ['1m,0ms', /MSGX_TX_REDELIVERY_SCHEDULE: item 2 \("0ms"\)/],
  ])('MSGX_TX_REDELIVERY_SCHEDULE=%s is refused naming the item', (schedule, message) => {
    expect(() => loadConfig({ MSGX_TX_REDELIVERY_SCHEDULE: schedule })).toThrow(ConfigError);
    expect(() => loadConfig({ MSGX_TX_REDELIVERY_SCHEDULE: schedule })).toThrow(message);
  });

  it('keeps a first 0s (the first delivery at once, the default) and positive steps', () => {
    expect(loadConfig({}).txmsg.redeliveryScheduleMs).toEqual([0, 60_000, 240_000, 600_000, 1_800_000, 3_600_000]);
    expect(loadConfig({ MSGX_TX_REDELIVERY_SCHEDULE: '0s,500ms,2s' }).txmsg.redeliveryScheduleMs).toEqual([0, 500, 2000]);
    expect(loadConfig({ MSGX_TX_REDELIVERY_SCHEDULE: '30s' }).txmsg.redeliveryScheduleMs).toEqual([30_000]);
  });

  it.each(['25:99', '24:00', '03:60', '3:30'])('MSGX_HISTORY_SWEEP_AT=%s is refused', (at) => {
    expect(() => loadConfig({ MSGX_HISTORY_SWEEP_AT: at })).toThrow(/MSGX_HISTORY_SWEEP_AT: must be HH:MM in airport time, 00:00 to 23:59/);
  });

  it.each(['00:00', '03:30', '23:59'])('MSGX_HISTORY_SWEEP_AT=%s is taken', (at) => {
    expect(loadConfig({ MSGX_HISTORY_SWEEP_AT: at }).lifecycle.historySweepAt).toBe(at);
  });

  const body = { topic: 'orders', payload: { a: 1 }, checkUrl: 'https://shop.example/check' };
  it('checkAfterMs 0 is refused at prepare, naming the field; 1 is taken', () => {
    const refuse = () => parsePrepare({ ...body, checkAfterMs: 0 }, ['https://shop.example']);
    expect(refuse).toThrow(TxValidationError);
    expect(refuse).toThrow(/checkAfterMs: must be at least 1 ms/);
    expect(parsePrepare({ ...body, checkAfterMs: 1 }, ['https://shop.example']).checkAfterMs).toBe(1);
  });
});
