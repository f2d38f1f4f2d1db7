import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BOOTSTRAP = fileURLToPath(new URL('./bootstrap.mjs', import.meta.url));
/** Lambda's limit for a function's init phase. */
const INIT_MS = 10_000;

/** One runnable configuration of a function: `$LATEST` as it is now, or a published version. */
export interface FunctionCode {
  functionName: string;
  /** `$LATEST` or the version number. */
  version: string;
  /** The asset folder (mounted as /var/task) and its S3 key (names the code in records). */
  codeDir: string;
  codeKey: string;
  handler: string;
  runtime: string;
  timeoutSeconds: number;
  memoryMb: number;
  /** The template's environment, resolved (the runtime's own variables are added per instance). */
  environment: Record<string, string>;
  /** The Parameters and Secrets extension layer is attached. */
  secretsExtension: boolean;
  /** ReservedConcurrentExecutions: invocations running at once beyond it are throttled (429). */
  reservedConcurrency?: number;
}

export interface LambdaFunction {
  name: string;
  arn: string;
  logicalId: string;
  latest: FunctionCode;
  versions: Map<string, FunctionCode>;
  /** Alias name → version. */
  aliases: Map<string, string>;
  /** Asynchronous invocations: retries after a failure (EventInvokeConfig; Lambda's default is 2). */
  asyncRetries: number;
}

export interface Invocation {
  requestId: string;
  functionName: string;
  version: string;
  codeKey: string;
  type: 'RequestResponse' | 'Event';
  startedAt: number;
  endedAt?: number;
  outcome?: 'ok' | 'error' | 'timeout' | 'throttled';
  error?: { errorType: string; errorMessage: string };
  payload?: unknown;
}

export interface InvokeResult {
  ok: boolean;
  payload: unknown;
  executedVersion: string;
  invocation: Invocation;
}

interface Instance {
  id: string;
  code: FunctionCode;
  child: ChildProcess;
  ready: Promise<void>;
  busy: boolean;
  dead: boolean;
  sessionToken: string;
  onResult?: (m: { ok: boolean; payload?: unknown; error?: Invocation['error'] }) => void;
}

/** What an execution environment sees besides the template's variables. */
export interface RuntimeHost {
  region: string;
  account: string;
  /**
   * The function's variables as its environment sees them: paths of the runtime's file system
   * (/var/task, /var/runtime/…) mapped to local files, the local AWS endpoints, the extension's port.
   */
  environment(code: FunctionCode, sessionToken: string): Record<string, string>;
  logDir: string;
}

/**
 * The Lambda service: functions with `$LATEST`, published versions and aliases; each invocation
 * runs in an execution environment (a child Node process running bootstrap.mjs) that serves one
 * invocation at a time, is frozen (SIGSTOP) between invocations, and is killed (SIGKILL) at the
 * function's timeout — the next invocation then gets a fresh environment. Concurrent invocations
 * get environments of their own.
 */
export class LambdaService {
  readonly functions = new Map<string, LambdaFunction>();
  readonly invocations: Invocation[] = [];
  private readonly instances: Instance[] = [];
  private stopped = false;

  constructor(private readonly host: RuntimeHost) {}

  /** `name`, `name:qualifier`, a function ARN with or without qualifier → the function and qualifier. */
  find(nameOrArn: string, qualifier?: string): { fn: LambdaFunction; qualifier: string } {
    let name = nameOrArn;
    let q = qualifier;
    const arn = /^arn:aws:lambda:[^:]+:\d+:function:([^:]+)(?::(.+))?$/.exec(nameOrArn);
    if (arn) [name, q] = [arn[1]!, q ?? arn[2]];
    else if (nameOrArn.includes(':')) [name, q] = [nameOrArn.split(':')[0]!, q ?? nameOrArn.split(':')[1]];
    const fn = this.functions.get(name);
    if (!fn) throw new LambdaError(404, 'ResourceNotFoundException', `Function not found: ${nameOrArn}`);
    return { fn, qualifier: q ?? '$LATEST' };
  }

  codeOf(fn: LambdaFunction, qualifier: string): FunctionCode {
    if (qualifier === '$LATEST') return fn.latest;
    const version = fn.aliases.get(qualifier) ?? qualifier;
    const code = fn.versions.get(version);
    if (!code) throw new LambdaError(404, 'ResourceNotFoundException', `Function not found: ${fn.arn}:${qualifier}`);
    return code;
  }

  /** Invokes synchronously (RequestResponse) and answers with the handler's result or error. */
  async invoke(
    nameOrArn: string,
    event: unknown,
    o: { qualifier?: string; type?: 'RequestResponse' | 'Event' } = {},
  ): Promise<InvokeResult> {
    const { fn, qualifier } = this.find(nameOrArn, o.qualifier);
    const code = this.codeOf(fn, qualifier);
    const invokedArn = qualifier === '$LATEST' ? fn.arn : `${fn.arn}:${qualifier}`;
    return this.run(code, event, invokedArn, o.type ?? 'RequestResponse');
  }

  /** Invokes asynchronously (Event): queued, retried as the function's EventInvokeConfig says. */
  invokeAsync(nameOrArn: string, event: unknown, o: { qualifier?: string } = {}): void {
    const { fn, qualifier } = this.find(nameOrArn, o.qualifier);
    const code = this.codeOf(fn, qualifier);
    const invokedArn = qualifier === '$LATEST' ? fn.arn : `${fn.arn}:${qualifier}`;
    void (async () => {
      for (let attempt = 0; attempt <= fn.asyncRetries && !this.stopped; attempt++) {
        const r = await this.run(code, event, invokedArn, 'Event').catch(() => undefined);
        if (r?.ok || r?.invocation.outcome === 'throttled') return;
      }
    })();
  }

  /**
   * Stops every environment of `functionName` that is running an invocation right now, as a host
   * that stops giving it CPU: it makes no progress until Lambda kills it at its timeout.
   */
  stall(functionName: string): { pid: number; resume(): void }[] {
    const busy = this.instances.filter((i) => i.code.functionName === functionName && i.busy && !i.dead);
    for (const i of busy) i.child.kill('SIGSTOP');
    return busy.map((i) => ({ pid: i.child.pid!, resume: () => void (!i.dead && i.child.kill('SIGCONT')) }));
  }

  /** Environments alive now (busy or frozen), per function name. */
  environments(functionName?: string): number {
    return this.instances.filter((i) => !i.dead && (!functionName || i.code.functionName === functionName)).length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.instances].map((i) => this.kill(i)));
  }

  private async run(code: FunctionCode, event: unknown, invokedArn: string, type: Invocation['type']): Promise<InvokeResult> {
    if (this.stopped) throw new LambdaError(503, 'ServiceException', 'the emulator is stopping');
    const inv: Invocation = {
      requestId: randomUUID(),
      functionName: code.functionName,
      version: code.version,
      codeKey: code.codeKey,
      type,
      startedAt: Date.now(),
    };
    this.invocations.push(inv);
    // Reserved concurrency is the function's, whatever version or alias is invoked: a throttle
    // beyond it, before any environment starts (none is spawned, none is kept for it).
    const reserved = this.functions.get(code.functionName)?.latest.reservedConcurrency;
    const busy = this.instances.filter((i) => i.code.functionName === code.functionName && i.busy && !i.dead).length;
    if (reserved !== undefined && busy >= reserved) {
      inv.outcome = 'throttled';
      inv.endedAt = Date.now();
      throw new LambdaError(429, 'TooManyRequestsException', 'Rate Exceeded.');
    }
    let inst = this.instances.find((i) => i.code === code && !i.busy && !i.dead);
    if (inst) inst.busy = true;
    else inst = this.spawn(code);
    const log = join(this.host.logDir, `${code.functionName}.log`);
    appendFileSync(log, `START RequestId: ${inv.requestId} Version: ${code.version} Environment: ${inst.id}\n`);
    const outcome = await new Promise<{ ok: boolean; payload?: unknown; error?: Invocation['error']; timeout?: boolean }>((resolve) => {
      // As in Lambda, the function's timeout counts from the end of its init (loading the
      // handler's module), which may take up to INIT_MS of its own.
      let deadline = inv.startedAt + INIT_MS + code.timeoutSeconds * 1000;
      let timer = setTimeout(() => expire(), deadline - Date.now());
      const expire = () =>
        resolve({
          ok: false,
          timeout: true,
          error: { errorType: 'Sandbox.Timedout', errorMessage: `${inv.requestId} Task timed out after ${code.timeoutSeconds}.00 seconds` },
        });
      inst.onResult = (m) => {
        clearTimeout(timer);
        resolve(m);
      };
      inst.ready.then(
        () => {
          deadline = Math.min(deadline, Date.now() + code.timeoutSeconds * 1000);
          clearTimeout(timer);
          timer = setTimeout(() => expire(), deadline - Date.now());
          inst.child.kill('SIGCONT');
          // An environment that died meanwhile answers through its 'exit' handler.
          inst.child.send({ type: 'invoke', id: inv.requestId, event, deadline, invokedArn }, () => {});
        },
        (err: Error) => inst.onResult?.({ ok: false, error: { errorType: err.name, errorMessage: err.message } }),
      );
    });
    inst.onResult = undefined;
    inv.endedAt = Date.now();
    inv.outcome = outcome.ok ? 'ok' : outcome.timeout ? 'timeout' : 'error';
    inv.error = outcome.error;
    inv.payload = outcome.payload;
    appendFileSync(
      log,
      `END RequestId: ${inv.requestId} ${inv.outcome} ${inv.endedAt - inv.startedAt} ms${outcome.error ? ` ${JSON.stringify(outcome.error)}` : ''}\n`,
    );
    if (outcome.ok) {
      // Frozen until its next invocation: no timers fire, no socket is served.
      inst.child.kill('SIGSTOP');
      inst.busy = false;
    } else {
      // After a timeout or an error that ended the runtime, Lambda starts the next one afresh.
      await this.kill(inst);
    }
    return { ok: outcome.ok, payload: outcome.ok ? outcome.payload : outcome.error, executedVersion: code.version, invocation: inv };
  }

  private spawn(code: FunctionCode): Instance {
    const id = randomBytes(4).toString('hex');
    const sessionToken = `emulated-session-${randomBytes(12).toString('hex')}`;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LANG: 'en_US.UTF-8',
      ...this.host.environment(code, sessionToken),
      _HANDLER: code.handler,
      LAMBDA_TASK_ROOT: code.codeDir,
      AWS_EXECUTION_ENV: `AWS_Lambda_${code.runtime}`,
      AWS_REGION: this.host.region,
      AWS_DEFAULT_REGION: this.host.region,
      AWS_LAMBDA_FUNCTION_NAME: code.functionName,
      AWS_LAMBDA_FUNCTION_VERSION: code.version,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(code.memoryMb),
      AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${code.functionName}`,
      AWS_LAMBDA_LOG_STREAM_NAME: `emulated/[${code.version}]${id}`,
      AWS_ACCESS_KEY_ID: 'ASIAEMULATEDLAMBDA00',
      AWS_SECRET_ACCESS_KEY: 'emulated-secret-access-key',
      AWS_SESSION_TOKEN: sessionToken,
    };
    const child = fork(BOOTSTRAP, [], { cwd: code.codeDir, env, execArgv: [], stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    child.on('error', () => {}); // a write to a killed environment (EPIPE): its exit is reported below
    const log = join(this.host.logDir, `${code.functionName}.log`);
    const tag = `[${code.version} ${id}] `;
    for (const s of [child.stdout!, child.stderr!]) s.on('data', (d: Buffer) => appendFileSync(log, tag + d.toString('utf8')));
    const inst: Instance = { id, code, child, busy: true, dead: false, sessionToken, ready: Promise.resolve() };
    inst.ready = new Promise<void>((resolve, reject) => {
      child.on('message', (m: { type: string; ok?: boolean; payload?: unknown; error?: Invocation['error'] }) => {
        if (m.type === 'ready') resolve();
        else if (m.type === 'init-error') reject(Object.assign(new Error(m.error!.errorMessage), { name: m.error!.errorType }));
        else if (m.type === 'result') inst.onResult?.({ ok: m.ok!, payload: m.payload, error: m.error });
      });
      child.on('exit', (status, signal) => {
        inst.dead = true;
        const error = { errorType: 'Runtime.ExitError', errorMessage: `RequestId: exited with ${signal ?? `status ${status}`}` };
        reject(Object.assign(new Error(error.errorMessage), { name: error.errorType }));
        inst.onResult?.({ ok: false, error });
      });
    });
    inst.ready.catch(() => {});
    this.instances.push(inst);
    return inst;
  }

  private async kill(inst: Instance): Promise<void> {
    const i = this.instances.indexOf(inst);
    if (i >= 0) this.instances.splice(i, 1);
    if (inst.child.exitCode !== null || inst.child.signalCode !== null) return;
    const gone = new Promise<void>((r) => inst.child.once('exit', () => r()));
    inst.child.kill('SIGKILL');
    await gone;
  }
}

/**
 * API Gateway's Lambda proxy integration: a synchronous invoke whose rejection by the Lambda API
 * (a throttle beyond the reserved concurrency, 429 TooManyRequestsException) is a failed
 * integration, which API Gateway answers 500 {"message":"Internal Server Error"} without retrying
 * (AWS Lambda Developer Guide, "Handling Lambda errors with an API Gateway API"): the caller retries.
 */
export function apiIntegration(lambda: LambdaService) {
  return async (functionArn: string, event: unknown): Promise<{ ok: boolean; payload: unknown }> =>
    lambda.invoke(functionArn, event).catch((err: Error) => ({ ok: false, payload: err.message }));
}

/** An error of the Lambda API, with its HTTP status and error type (x-amzn-errortype). */
export class LambdaError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}
