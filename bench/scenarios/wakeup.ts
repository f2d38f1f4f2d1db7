import type { RunOptions, ScenarioResult } from '../lib/result.ts';
export async function wakeupScenario(_o: RunOptions): Promise<ScenarioResult> {
  return { scenario: 'wakeup', title: 'wakeup', figures: [], notes: [], meta: {}, skipped: 'not written yet' };
}
