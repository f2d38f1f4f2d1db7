/** Kafka's own limit on a topic name's length (org.apache.kafka.common.internals.Topic). */
export const MAX_TOPIC_NAME_LENGTH = 249;

/**
 * Why Kafka would refuse `name` as a topic name, or undefined when it is legal: Kafka's rules
 * (Topic.validate) are 1–249 characters from [a-zA-Z0-9._-], and neither `.` nor `..`.
 * Checked where a name enters msgx, so a topic that can never exist is refused at once.
 */
export function topicNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'must not be empty';
  if (name.length > MAX_TOPIC_NAME_LENGTH) return `must be at most ${MAX_TOPIC_NAME_LENGTH} characters (Kafka's limit)`;
  if (!/^[A-Za-z0-9._-]+$/.test(name)) return 'must be a Kafka topic name: letters, digits, ".", "_" and "-" only';
  if (name === '.' || name === '..') return `"${name}" is not a legal Kafka topic name`;
  return undefined;
}
