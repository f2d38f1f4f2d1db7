import { parentPort } from 'node:worker_threads';
import { decode } from '../codec/decode.ts';
import { MalformedError } from '../shared/errors.ts';
import type { OffThreadAnswer, OffThreadAsk } from './offThread.ts';

/**
 * The twin's decode thread: decodes what the pump hands it and answers with the decoded form, or
 * the reason when the text is malformed. Any other failure answers with neither, and the pump
 * decodes that text itself, so its error is exactly what an in-process decode would give.
 */
const port = parentPort!;
port.on('message', (m: OffThreadAsk) => {
  let answer: OffThreadAnswer;
  try {
    answer = { id: m.id, decoded: decode(m.text, { timezone: m.timezone, limits: { maxBytes: m.maxBytes }, dayBoundary: m.dayBoundary }) };
  } catch (err) {
    answer = { id: m.id, malformed: err instanceof MalformedError ? err.message : undefined };
  }
  try {
    port.postMessage(answer);
  } catch {
    port.postMessage({ id: m.id });
  }
});
