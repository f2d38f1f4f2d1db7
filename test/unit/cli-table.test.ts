import { describe, expect, it } from 'vitest';
import { table } from '../../lib/cli/table.ts';

describe('CLI tables', () => {
  const reason = `https://receiver.example.com/hooks/msgx/very/long/path/that/goes/on answered HTTP 400: unknown flight`;
  const rows = [{ id: 7, url: 'x'.repeat(80), reason }];

  it('never cuts the last column, so a reason is read whole', () => {
    const text = table(rows);
    expect(text).toContain(reason);
    expect(text).toContain('HTTP 400');
  });

  it('caps every other column at 60 characters and marks the cut', () => {
    const line = table(rows).split('\n')[2]!;
    expect(line).toContain(`${'x'.repeat(59)}…`);
    expect(line).not.toContain('x'.repeat(60));
  });

  it('keeps columns aligned: each value starts where its header does', () => {
    const [header, , row] = table([
      { a: 1, bb: 'two', c: 'three' },
      { a: 10, bb: 'x', c: 'y' },
    ]).split('\n');
    expect(header!.indexOf('c')).toBe(row!.indexOf('three'));
    expect(header!.indexOf('bb')).toBe(row!.indexOf('two'));
  });
});

describe('CLI tables with a width', () => {
  const detail = 'CODEC_ERROR: '.padEnd(300, 'the reason goes on and on ');

  it('cuts the last column so every line fits, and marks the cut', () => {
    const text = table([{ msg: 1, class: 'CODEC_ERROR', detail }], undefined, { width: 80 });
    for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    expect(text.split('\n')[2]!.endsWith('…')).toBe(true);
  });

  it('leaves a short last column whole', () => {
    expect(table([{ msg: 1, detail: 'short' }], undefined, { width: 80 }).split('\n')[2]).toBe('1    short');
  });

  it('keeps a row on one line when a value holds line breaks', () => {
    expect(table([{ a: 'x\ny', b: 'z' }]).split('\n')).toHaveLength(3);
  });

  it('turns each run of white space holding a line break into one space, and leaves other runs', () => {
    expect(table([{ a: 'x \r\n \n  y  z' }]).split('\n')[2]).toBe('x y  z');
  });
});

describe('CLI tables too wide for their width', () => {
  const row = {
    id: '0b7f6c2e-1a2b-4c3d-8e9f-001122334455',
    topic: `orders.${'t'.repeat(50)}`,
    where: 'w'.repeat(50),
    reason: 'r'.repeat(80),
  };

  it('narrow the widest other column, never one kept whole, so the last one has room', () => {
    const text = table([row], undefined, { width: 120, keepWhole: ['id'] });
    for (const line of text.split('\n')) expect(line.length).toBeLessThanOrEqual(120);
    const line = text.split('\n')[2]!;
    expect(line).toContain(row.id);
    expect(line).toMatch(/orders\.t+…/);
    expect(line).toMatch(/ r{23}…$/);
  });
});
