import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';

/**
 * SigV4 for the CLI's calls to the cloud API (service `execute-api`), with the default AWS
 * credential chain (environment, profile and SSO, web identity, container and instance roles), so
 * an operator runs the CLI from a laptop as the operator role (docs/deploy.md "Operators and least
 * privilege").
 */

/** `<apiId>.execute-api.<region>.amazonaws.com[.cn]`: the region is in the name. */
const EXECUTE_API_HOST = /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/;

/**
 * The region to sign for, or undefined when the API is not signed: an execute-api host is always
 * signed; any other host (a custom domain) only when asked (`--sigv4`, MSGX_API_SIGV4=1), with
 * the region from AWS_REGION (or AWS_DEFAULT_REGION).
 */
export function signingRegion(base: URL, env: Record<string, string | undefined>, asked: boolean): string | undefined {
  const m = EXECUTE_API_HOST.exec(base.hostname);
  if (m) return m[1];
  if (!asked) return undefined;
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION;
  if (!region) throw new Error(`signing requests to ${base.host} needs a region: set AWS_REGION (the API's region)`);
  return region;
}

/** SHA-256 (and HMAC-SHA256 with a key) from node:crypto, in the shape the signer takes. */
type Data = string | ArrayBuffer | ArrayBufferView;
const bytes = (d: Data): string | Uint8Array =>
  typeof d === 'string' ? d : ArrayBuffer.isView(d) ? new Uint8Array(d.buffer, d.byteOffset, d.byteLength) : new Uint8Array(d);

class NodeSha256 {
  readonly #hash: Hash | Hmac;
  constructor(secret?: Data) {
    this.#hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: Data): void {
    this.#hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
}

export interface SignableRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
}

/** Signs requests for `region`; the headers to send (without `host`, which fetch sets to the same value). */
export function sigv4Signer(region: string): (req: SignableRequest) => Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: 'execute-api', region, credentials: defaultProvider(), sha256: NodeSha256 });
  return async ({ method, url, headers, body }) => {
    const query: Record<string, string | string[]> = {};
    for (const [k, v] of url.searchParams) {
      const prev = query[k];
      query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    let signed;
    try {
      signed = await signer.sign({
        method,
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port ? Number(url.port) : undefined,
        path: url.pathname,
        query,
        headers: { ...headers, host: url.host },
        body,
      });
    } catch (err) {
      throw new Error(
        `cannot sign the request to ${url.host}: ${(err as Error).message}; give AWS credentials the usual way (AWS_PROFILE and aws sso login, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)`,
      );
    }
    const { host: _host, ...rest } = signed.headers as Record<string, string>;
    return rest;
  };
}
