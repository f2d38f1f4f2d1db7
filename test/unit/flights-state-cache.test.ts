import { expect, it } from 'vitest';
import { blankFlight } from '../../lib/flights/model.ts';
import { FlightStateCache } from '../../lib/flights/stateCache.ts';

const state = (flid: string) => blankFlight(flid, '20261129');

it('serves a state only at the row version it was cached at, and forgets it otherwise', () => {
  const cache = new FlightStateCache();
  const s = state('F1');
  cache.set('F1', '100:(0,1)', s);
  expect(cache.get('F1', '100:(0,1)')).toBe(s);
  expect(cache.get('F1', '100:(0,2)')).toBeUndefined();
  expect(cache.get('F1', '100:(0,1)')).toBeUndefined();
  expect(cache.get('F2', '100:(0,1)')).toBeUndefined();
});

it('keeps at most its capacity, dropping the least recently used flight', () => {
  const cache = new FlightStateCache(2);
  cache.set('A', 'v', state('A'));
  cache.set('B', 'v', state('B'));
  cache.get('A', 'v'); // A is now more recent than B
  cache.set('C', 'v', state('C'));
  expect(cache.size).toBe(2);
  expect(cache.get('B', 'v')).toBeUndefined();
  expect(cache.get('A', 'v')?.flid).toBe('A');
  expect(cache.get('C', 'v')?.flid).toBe('C');
});
