import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extensionReader, lambdaSecretReader, resolveSecretEnv, secretsManagerReader, urlSources } from '../../lib/config/secrets.ts';
import {
  fakeSecretsExtension,
  fakeSecretsManager,
  type FakeExtension,
  type FakeSecretsManager,
  type SecretStore,
} from '../helpers/fakeAws.ts';

/**
 * How a function reads its secrets (lib/config/secrets.ts), against local servers that speak the
 * real protocols: the Parameters and Secrets extension (cold start, cached) and Secrets Manager
 * through the real AWS SDK (fallback, and the re-read after a refused login, never cached).
 */
const PG = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:msgx/dev/postgres-app-AbCdEf';
const SIGNING = 'arn:aws:secretsmanager:eu-west-1:210987654321:secret:msgx/dev/signing-GhIjKl';

describe('secrets through the Lambda extension, Secrets Manager behind it', () => {
  const store: SecretStore = { values: new Map() };
  let ext: FakeExtension;
  let sm: FakeSecretsManager;
  const env = () => ({ PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(ext.port), AWS_SESSION_TOKEN: ext.token });

  beforeAll(async () => {
    ext = await fakeSecretsExtension(store);
    sm = await fakeSecretsManager(store);
  });
  afterAll(async () => {
    await ext?.close();
    await sm?.close();
  });
  const reset = (values: Record<string, string>) => {
    store.values = new Map(Object.entries(values));
    for (const a of [ext.requests, ext.fetches, sm.calls]) a.length = 0;
    ext.clear();
  };

  it('the extension client sends the secret id and the session token, and returns SecretString', async () => {
    reset({ [PG]: '{"username":"msgx_app","password":"p1"}' });
    const read = extensionReader({ port: ext.port, token: ext.token });
    expect(await read(PG)).toBe('{"username":"msgx_app","password":"p1"}');
    expect(ext.requests).toEqual([PG]);
    // A wrong token, an unknown secret: the extension's status and words, not a JSON parse error.
    await expect(extensionReader({ port: ext.port, token: 'other' })(PG)).rejects.toThrow(/secrets extension answered 401 .*Token/);
    await expect(read(`${PG}-gone`)).rejects.toThrow(/answered 400 .*ResourceNotFoundException/);
  });

  it('a cold start reads every secret through the extension and never loads the SDK client', async () => {
    reset({ [PG]: '{"username":"msgx_app","password":"p1","port":5432}', [SIGNING]: 'hmac-key' });
    const sdkCalls: string[] = [];
    const read = lambdaSecretReader(env(), { sdk: async (arn) => (sdkCalls.push(arn), 'never') });
    const out = await resolveSecretEnv({ MSGX_PG_SECRET_ARN: PG, MSGX_PG_HOST: 'db.internal', MSGX_SIGNING_SECRET_ARN: SIGNING }, read);
    expect(new URL(out.MSGX_PG_URL!).password).toBe('p1');
    expect(out.MSGX_SIGNING_SECRET).toBe('hmac-key');
    expect(ext.requests).toEqual([PG, SIGNING]);
    expect(sdkCalls).toEqual([]);
  });

  it('after a rotation the re-read (fresh) goes past the extension cache to Secrets Manager', async () => {
    reset({ [PG]: '{"username":"msgx_app","password":"before"}' });
    const read = lambdaSecretReader(env(), { sdk: secretsManagerReader(sm.sdkConfig) });
    const envVars = { MSGX_PG_SECRET_ARN: PG, MSGX_PG_HOST: 'db.internal' };
    expect(new URL((await resolveSecretEnv(envVars, read)).MSGX_PG_URL!).password).toBe('before');
    store.values.set(PG, '{"username":"msgx_app_clone","password":"after"}');
    // The extension still serves the cached value for its TTL...
    expect(new URL((await resolveSecretEnv(envVars, read)).MSGX_PG_URL!).password).toBe('before');
    // ...the refresher the clients call on a refused login does not ask it.
    const requestsBefore = ext.requests.length;
    const url = new URL(await urlSources(envVars, read, { fresh: true }).pg!());
    expect([url.username, url.password]).toEqual(['msgx_app_clone', 'after']);
    expect(sm.calls).toEqual([PG]);
    expect(ext.requests.length).toBe(requestsBefore);
  });

  it('without the extension (no port, or nothing listening) the SDK reads Secrets Manager', async () => {
    reset({ [SIGNING]: 'hmac-key' });
    const sdk = secretsManagerReader(sm.sdkConfig);
    expect(await lambdaSecretReader({}, { sdk })(SIGNING)).toBe('hmac-key');
    // The layer's variables are set but the extension is not there: refused connection, then the SDK.
    const closed = await fakeSecretsExtension(store);
    await closed.close();
    const read = lambdaSecretReader({ PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(closed.port), AWS_SESSION_TOKEN: 't' }, { sdk });
    expect(await read(SIGNING)).toBe('hmac-key');
    expect(sm.calls).toEqual([SIGNING, SIGNING]);
    expect(ext.requests).toEqual([]);
  });

  it('when both fail, the error names both causes', async () => {
    reset({});
    const read = lambdaSecretReader(env(), { sdk: secretsManagerReader(sm.sdkConfig) });
    await expect(read(PG)).rejects.toThrow(
      /secrets extension failed \(.*ResourceNotFoundException.*\) and so did Secrets Manager: .*can't find the specified secret/,
    );
  });
});
