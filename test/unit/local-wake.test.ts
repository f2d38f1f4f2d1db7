import { describe, expect, it } from 'vitest';
import { LocalWakes } from '../../lib/db/localWake.ts';

/**
 * A wake reaches each listener in this process once: at its commit (now()) or by the server's
 * NOTIFY, whichever comes first; the other one is not a second wake-up.
 */
describe('local wakes', () => {
  const setup = () => {
    const wakes = new LocalWakes();
    const heard: string[] = [];
    const l = wakes.add('ch', (p) => heard.push(p));
    return { wakes, heard, l };
  };

  it('the commit wakes at once; the NOTIFY that follows is skipped', () => {
    const { wakes, heard, l } = setup();
    const w = wakes.wake('ch');
    w.now();
    l.notified(w.payload);
    expect(heard).toEqual([w.payload]);
  });

  it('a NOTIFY that arrives before the commit is done wakes; the commit then does not wake again', () => {
    const { wakes, heard, l } = setup();
    const w = wakes.wake('ch');
    l.notified(w.payload);
    w.now();
    expect(heard).toEqual([w.payload]);
  });

  it("other processes' NOTIFYs always wake", () => {
    const { heard, l } = setup();
    l.notified('from-elsewhere');
    l.notified('from-elsewhere');
    expect(heard).toEqual(['from-elsewhere', 'from-elsewhere']);
  });

  it('a later wake with a payload seen before still wakes once', () => {
    const { wakes, heard, l } = setup();
    const a = wakes.wake('ch', '42');
    a.now();
    l.notified('42');
    const b = wakes.wake('ch', '42');
    l.notified('42');
    b.now();
    expect(heard).toEqual(['42', '42']);
  });
});
