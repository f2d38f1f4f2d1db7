// Types of what scripts/services.mjs exports for the fault runs' private brokers.
export interface KafkaInstance {
  dir: string;
  port: number;
  controllerPort: number;
}
export function startKafka(inst?: KafkaInstance): Promise<string>;
export function stopKafka(inst?: KafkaInstance, options?: { kill?: boolean }): Promise<boolean>;
export function kafkaPid(inst?: KafkaInstance): number | null;
