import type { RunOptions, ScenarioResult } from '../lib/result.ts';
export async function relayScenario(_o: RunOptions): Promise<ScenarioResult> {
  return { scenario: 'relay', title: 'relay', figures: [], notes: [], meta: {}, skipped: 'not written yet' };
}
