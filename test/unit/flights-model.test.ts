import { describe, expect, it } from 'vitest';
import type { FlightPatch } from '../../lib/codec/message.ts';
import { flightJson } from '../../lib/flights/json.ts';
import { applyPatch, blankFlight, diffFlights } from '../../lib/flights/model.ts';

const patch = (p: Partial<FlightPatch>): FlightPatch => ({ scalars: {}, resources: {}, extra: [], ...p });
const base = () =>
  applyPatch(
    blankFlight('1', '20261129'),
    patch({
      scalars: { FLNO: '0310', STAT: 'SCH' },
      extra: [
        ['A', '1'],
        ['B', '2'],
      ],
    }),
  );

describe('flight merge rules', () => {
  it('sets scalars present, keeps absent ones, and an empty one clears to ""', () => {
    const next = applyPatch(base(), patch({ scalars: { STAT: '', ETOT: '20261129101500' } }));
    expect(next.scalars).toEqual({ FLNO: '0310', STAT: '', ETOT: '20261129101500' });
    expect(diffFlights(base(), next).fields).toEqual(['STAT', 'ETOT']);
  });

  it('replaces unknown elements in place and appends new ones', () => {
    const next = applyPatch(
      base(),
      patch({
        extra: [
          ['C', '3'],
          ['A', 'x'],
        ],
      }),
    );
    expect(next.extra).toEqual([
      ['A', 'x'],
      ['B', '2'],
      ['C', '3'],
    ]);
    expect(diffFlights(base(), next)).toMatchObject({ fields: ['A', 'C'], main: true, kinds: [] });
  });

  it('a collection present replaces the stored one; only that kind is written', () => {
    const withGate = applyPatch(base(), patch({ resources: { GATE: [{ key: 'B1', nodes: [['CODE', 'B1']] }] } }));
    const d = diffFlights(base(), withGate);
    expect(d).toEqual({ fields: ['GATE'], main: false, kinds: ['GATE'] });
    const cleared = applyPatch(withGate, patch({ resources: { GATE: [] } }));
    expect(cleared.resources.GATE).toEqual([]);
  });

  it('the same content is no change at all', () => {
    const d = diffFlights(base(), applyPatch(base(), patch({ scalars: { FLNO: '0310' }, extra: [['B', '2']] })));
    expect(d).toEqual({ fields: [], main: false, kinds: [] });
  });

  it('renders the flight with wire names, unknowns after known fields', () => {
    const j = flightJson({ ...base(), stateVersion: 3, updatedAt: new Date('2026-11-29T00:00:00Z') });
    expect(Object.keys(j)).toEqual([
      'FLID',
      'OPDY',
      'FLNO',
      'STAT',
      'ROUT',
      'ERUT',
      'CSFL',
      'GATE',
      'STND',
      'BELT',
      'CHKC',
      'BRDG',
      'LNGE',
      'DLAY',
      'A',
      'B',
      'stateVersion',
      'status',
      'updatedAt',
    ]);
    expect(j).toMatchObject({ FLNO: '0310', A: '1', stateVersion: 3, status: 'ACTIVE', updatedAt: '2026-11-29T00:00:00.000Z' });
  });
});
