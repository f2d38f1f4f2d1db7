import type { RunOptions, ScenarioResult } from '../lib/result.ts';
export async function footprintScenario(_o: RunOptions): Promise<ScenarioResult> {
  return { scenario: 'footprint', title: 'footprint', figures: [], notes: [], meta: {}, skipped: 'not written yet' };
}
