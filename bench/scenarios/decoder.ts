import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { progress } from '../lib/progress.ts';
import { figure, type RunOptions, type ScenarioResult } from '../lib/result.ts';

const CORPUS = join(import.meta.dirname, '..', '..', 'test', 'fixtures', 'hostile', 'corpus.ts');
/** Cases built to blow up a parser: entity expansion, external entities, depth, floods, size. */
const BOMB =
  /billion-laughs|quadratic-blowup|xxe|deep-nesting|ref-flood|too-many-elements|body-\d|many-comments|huge-cdata|repeated-doctype/;

interface Timing {
  name: string;
  bytes: number;
  ms: number;
  outcome: string;
}

/**
 * decode() (precheck + parse + decode, what the pump runs) on every case of the hostile corpus
 * (test/fixtures/hostile/corpus.ts, another engineer's): the slowest case, its cost per KiB, and
 * the slowest bomb, which must be refused in < 10 ms. Skipped with a note when the corpus is not there.
 */
export async function decoderScenario(o: RunOptions): Promise<ScenarioResult> {
  const p = progress('decoder');
  if (!existsSync(CORPUS))
    return {
      scenario: 'decoder',
      title: 'Hostile-input decoder timing',
      figures: [],
      notes: [],
      meta: {},
      skipped: 'test/fixtures/hostile/corpus.ts not present',
    };
  const mod = (await import(CORPUS)) as {
    timeDecoder?: (o: { runs?: number }) => Timing[];
    loadCorpus: () => { name: string; expect: { errorClass?: string } }[];
  };
  if (!mod.timeDecoder) throw new Error('corpus.ts has no timeDecoder()');
  // A bomb: a parser-killer shape the corpus expects refused as MALFORMED (floods under the
  // limits are legal input and are expected to decode; they count only for "slowest case").
  const refused = new Set(
    mod
      .loadCorpus()
      .filter((c) => c.expect.errorClass === 'MALFORMED')
      .map((c) => c.name),
  );
  const isBomb = (name: string) => BOMB.test(name) && refused.has(name);
  const slowest: number[] = [];
  // The slowest case's cost per KiB: linear checks keep it flat whatever the shape (the worst
  // shapes at the size limit are in the corpus as "worst-*").
  const slowestPerKb: number[] = [];
  const bombMax: number[] = [];
  let last: Timing[] = [];
  const accepted = new Set<string>();
  for (let r = 0; r < o.runs; r++) {
    const t = mod.timeDecoder({ runs: o.quick ? 3 : 5 });
    last = t;
    const bombs = t.filter((c) => isBomb(c.name));
    for (const b of bombs) if (b.outcome.startsWith('decoded')) accepted.add(b.name);
    slowest.push(t[0]!.ms);
    slowestPerKb.push(t[0]!.ms / (t[0]!.bytes / 1024));
    bombMax.push(Math.max(...bombs.map((b) => b.ms)));
    p.step(
      `${r + 1}/${o.runs}`,
      `${t.length} cases; slowest ${t[0]!.name} ${t[0]!.ms.toFixed(2)} ms; slowest bomb ${bombs[0]?.name} ${bombs[0]?.ms.toFixed(2)} ms`,
    );
  }
  const bombs = last.filter((c) => isBomb(c.name));
  const top = last
    .slice(0, 5)
    .map((c) => `${c.name} ${c.ms.toFixed(2)} ms (${(c.bytes / 1024).toFixed(0)} KiB, ${c.outcome.slice(0, 50)})`);
  return {
    scenario: 'decoder',
    title: `Hostile-input decoder: ${last.length} cases`,
    figures: [
      figure('decoder.slowest', `slowest case (${last[0]!.name})`, 'ms', slowest, { better: 'lower' }),
      figure(
        'decoder.slowestPerKb',
        `slowest case's cost per KiB (${last[0]!.name}, ${(last[0]!.bytes / 1024).toFixed(0)} KiB)`,
        'ms/KiB',
        slowestPerKb,
        { better: 'lower', headline: true },
      ),
      figure('decoder.bomb', `slowest bomb of ${bombs.length} (${bombs[0]?.name})`, 'ms', bombMax, {
        target: { op: '<', value: 10 },
        headline: true,
      }),
    ],
    notes: [
      `slowest five: ${top.join('; ')}`,
      `highest cost per KiB among cases of 256 KiB or more: ${last
        .filter((c) => c.bytes >= 256 * 1024)
        .map((c) => ({ c, perKb: c.ms / (c.bytes / 1024) }))
        .sort((a, b) => b.perKb - a.perKb)
        .slice(0, 3)
        .map(({ c, perKb }) => `${c.name} ${perKb.toFixed(3)} ms/KiB`)
        .join('; ')}`,
      ...(accepted.size ? [`bomb cases decoded instead of refused: ${[...accepted].join(', ')}`] : []),
    ],
    meta: {
      cases: last.length,
      bombs: bombs.map((b) => ({ name: b.name, bytes: b.bytes, ms: b.ms, outcome: b.outcome })),
      slowest: last.slice(0, 10),
    },
  };
}
