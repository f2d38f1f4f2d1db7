import type { ProcessorRegistry } from '../pipeline/processor.ts';
import { refdProcessor } from '../requests/reference.ts';
import { fdelProcessor } from './fdel.ts';
import { flopProcessor } from './flop.ts';
import { scheduleProcessor } from './schedule.ts';

/** Registers every flight-state processor (and the reference-data answer) with the pump's registry. */
export function registerFlightProcessors(registry: ProcessorRegistry): ProcessorRegistry {
  return registry
    .register('SCHD:DNLD', scheduleProcessor)
    .register('SCHD:RESP', scheduleProcessor)
    .register('SCHD:ADFT', scheduleProcessor)
    .register('FLOP', flopProcessor)
    .register('FDEL', fdelProcessor)
    .register('REFD', refdProcessor);
}
