// The emulated Node.js Lambda runtime inside one execution environment (a child process): loads
// the handler named by _HANDLER from LAMBDA_TASK_ROOT (index.mjs, index.js or index.cjs, as the
// Node.js runtime looks for it), then runs one invocation at a time as the parent sends them. The
// parent freezes this process (SIGSTOP) between invocations and kills it at the deadline.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const send = (m) => new Promise((resolve) => process.send(m, resolve));
const errorOf = (e) => ({
  errorType: e?.name ?? 'Error',
  errorMessage: e?.message ?? String(e),
  trace: String(e?.stack ?? '').split('\n'),
});

let current;
// As the Node.js runtime does: an error nobody handles ends the invocation and the environment.
for (const event of ['uncaughtException', 'unhandledRejection'])
  process.on(event, async (e) => {
    await send({ type: 'result', id: current, ok: false, error: { ...errorOf(e), errorType: `Runtime.${event}` } });
    process.exit(129);
  });

async function load() {
  const [file, name] = process.env._HANDLER.split(/\.(?=[^.]+$)/);
  const root = process.env.LAMBDA_TASK_ROOT;
  const path = ['.mjs', '.js', '.cjs'].map((ext) => join(root, file + ext)).find((p) => existsSync(p));
  if (!path) throw Object.assign(new Error(`Cannot find module '${file}' in ${root}`), { name: 'Runtime.ImportModuleError' });
  const mod = await import(pathToFileURL(path).href);
  const handler = mod[name] ?? mod.default?.[name];
  if (typeof handler !== 'function')
    throw Object.assign(new Error(`${file}.${name} is undefined or not exported`), { name: 'Runtime.HandlerNotFound' });
  return handler;
}

// The emulator went away (its test process ended): so does this environment.
process.on('disconnect', () => process.exit(0));

const handlerPromise = load();
handlerPromise.then(
  () => send({ type: 'ready' }),
  (e) => send({ type: 'init-error', error: errorOf(e) }),
);

process.on('message', async (m) => {
  if (m.type !== 'invoke') return;
  current = m.id;
  const context = {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
    invokedFunctionArn: m.invokedArn,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: m.id,
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, m.deadline - Date.now()),
  };
  try {
    const handler = await handlerPromise;
    const result = await handler(m.event, context);
    await send({ type: 'result', id: m.id, ok: true, payload: result === undefined ? null : result });
  } catch (e) {
    await send({ type: 'result', id: m.id, ok: false, error: errorOf(e) });
  }
});
