import { ProcessorRegistry } from '../pipeline/processor.ts';

/** Every business processor msgx runs, by message kind. */
export function defaultRegistry(): ProcessorRegistry {
  const registry = new ProcessorRegistry();
  return registry;
}
