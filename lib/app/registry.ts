import { registerFlightProcessors } from '../flights/index.ts';
import { ProcessorRegistry } from '../pipeline/processor.ts';

/** Every business processor msgx runs, by message kind. */
export function defaultRegistry(): ProcessorRegistry {
  return registerFlightProcessors(new ProcessorRegistry());
}
