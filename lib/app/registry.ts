import { registerFlightProcessors } from '../flights/processors.ts';
import { ProcessorRegistry } from '../pipeline/processor.ts';

/** Every business processor msgx runs, by message kind. */
export function defaultRegistry(): ProcessorRegistry {
  return registerFlightProcessors(new ProcessorRegistry());
}
