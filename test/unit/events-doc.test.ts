import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RESOURCE_KINDS } from '../../lib/codec/vocabulary.ts';

const NUMBERS = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve'];

/**
 * docs/events.md is the consumers' contract: its flight example and its count of collections must
 * be the ones msgx emits (lib/flights/json.ts writes RESOURCE_KINDS in order). Seen red on the
 * doc as it was: "nine collections" and an example without ERUT.
 */
describe('docs/events.md flight object', () => {
  const doc = readFileSync(resolve(import.meta.dirname, '../../docs/events.md'), 'utf8');
  const example = JSON.parse(/## The flight object[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)![1]!) as Record<string, unknown>;

  it('shows every collection, in the order msgx writes them', () => {
    const collections = Object.keys(example).filter((k) => Array.isArray(example[k]));
    expect(collections).toEqual([...RESOURCE_KINDS]);
  });

  it('counts them right', () => {
    expect(doc).toContain(`The ${NUMBERS[RESOURCE_KINDS.length]} collections are always present`);
  });
});
