import type { RunOptions, ScenarioResult } from '../lib/result.ts';
export async function decoderScenario(_o: RunOptions): Promise<ScenarioResult> {
  return { scenario: 'decoder', title: 'decoder', figures: [], notes: [], meta: {}, skipped: 'not written yet' };
}
