import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { useJourney } from '../helpers/journey.ts';
import { randomTopic, readTopicToEnd } from '../helpers/kafka.ts';
import { waitFor } from '../helpers/services.ts';

/**
 * The outbox any service can write (docs/outbox.md "Writing the outbox with a plain INSERT"):
 * writers of their own — psql sessions and a Java program through the PostgreSQL JDBC driver —
 * insert into msg_event in overlapping transactions, one rolled back. A real Kafka consumer must
 * see exactly the events of the transactions that committed, per key in the order they
 * committed. The oracle is the test's own list of the transactions it committed.
 */
const JDBC = join(homedir(), '.m2/repository/org/postgresql/postgresql/42.7.13/postgresql-42.7.13.jar');
const topic = randomTopic('msgx-insert');
const target = `tx:${topic}`;
let classes: string;

// The Java writer is compiled before the twin starts (a hook registered first runs first).
beforeAll(() => {
  classes = mkdtempSync(join(tmpdir(), 'msgx-insert-java-'));
  // The driver comes from Maven Central, as the broker does; a machine that has it already skips the download.
  if (!existsSync(JDBC))
    execFileSync('mvn', ['-q', '-B', 'dependency:get', '-Dartifact=org.postgresql:postgresql:42.7.13'], { stdio: 'inherit' });
  execFileSync('javac', ['-cp', JDBC, '-d', classes, join(import.meta.dirname, '../fixtures/outbox-insert/OutboxInsert.java')]);
}, 180_000);
const world = useJourney('insert', { kafka: 'brokers', ownTopics: [{ topic }] });

/** A writer with its transaction open; end() commits or rolls it back. */
interface Writer {
  end(how: 'COMMIT' | 'ROLLBACK'): Promise<void>;
}

/** Reads the child's stdout until `word` appears. */
function until(child: ChildProcessWithoutNullStreams, word: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes(word)) resolve();
    });
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('exit', (code) => (out.includes(word) ? resolve() : reject(new Error(`writer exited ${code}: ${err}`))));
  });
}

async function psqlWriter(key: string, values: string[]): Promise<Writer> {
  const child = spawn('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', world.pg.url]);
  child.stdin.write('BEGIN;\n');
  for (const v of values)
    child.stdin.write(
      `INSERT INTO msg_event (target, partition_key, event_type, value, headers) VALUES ('${target}', '${key}', 'ORDER_PAID', '${v}', '{"writer":"psql"}');\n`,
    );
  child.stdin.write(`\\echo inserted\n`);
  await until(child, 'inserted');
  return {
    async end(how) {
      child.stdin.end(`${how};\n\\echo done\n`);
      await until(child, 'done');
    },
  };
}

async function javaWriter(key: string, values: string[]): Promise<Writer> {
  const url = new URL(world.pg.url);
  const jdbc = `jdbc:postgresql://${url.host}${url.pathname}?user=${url.username || 'postgres'}`;
  const child = spawn('java', ['-cp', `${classes}:${JDBC}`, 'OutboxInsert', jdbc, target, key, ...values]);
  await until(child, 'inserted');
  return {
    async end(how) {
      child.stdin.end(`${how}\n`);
      await until(child, 'done');
    },
  };
}

const seen = async () => (await readTopicToEnd(world.brokers, topic)).map((r) => `${r.key}:${r.value}`);

it('exactly the committed events reach Kafka, per key in commit order, from psql and Java writers in overlapping transactions', async () => {
  const committed: string[] = [];
  // Opened first (the lowest event_ids), committed last.
  const java = await javaWriter('order-1', ['j1', 'j2']);
  const psqlA = await psqlWriter('order-1', ['p1']);
  const gone = await psqlWriter('order-1', ['x1']);
  const other = await javaWriter('order-2', ['k1']);
  await psqlA.end('COMMIT');
  committed.push('order-1:p1');
  await gone.end('ROLLBACK');
  // What committed is delivered while the earlier writers still hold their transactions.
  await waitFor(async () => (await seen()).includes('order-1:p1'), { timeoutMs: 30_000 });
  await java.end('COMMIT');
  committed.push('order-1:j1', 'order-1:j2');
  await other.end('COMMIT');
  committed.push('order-2:k1');
  const last = await psqlWriter('order-1', ['p2']);
  await last.end('COMMIT');
  committed.push('order-1:p2');

  await waitFor(async () => (await seen()).length >= committed.length, { timeoutMs: 30_000 });
  const got = await seen();
  expect([...got].sort()).toEqual([...committed].sort());
  for (const key of ['order-1', 'order-2'])
    expect(got.filter((g) => g.startsWith(`${key}:`))).toEqual(committed.filter((c) => c.startsWith(`${key}:`)));
}, 120_000);
