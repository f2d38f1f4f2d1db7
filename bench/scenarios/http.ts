import type { RunOptions, ScenarioResult } from '../lib/result.ts';
export async function httpScenario(_o: RunOptions): Promise<ScenarioResult> {
  return { scenario: 'http', title: 'http', figures: [], notes: [], meta: {}, skipped: 'not written yet' };
}
