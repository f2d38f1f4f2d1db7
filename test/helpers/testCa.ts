import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Certificates made for a test with openssl, in `dir`: a certificate authority and server
 * certificates it signs, valid for two days, so a test can serve real TLS and check verification.
 */
function ssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A self-signed CA: `<name>.key` and `<name>.crt`. */
export function makeCa(dir: string, name: string): void {
  const key = ['-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`];
  ssl(dir, ['req', '-x509', ...key, '-days', '2', '-subj', `/CN=${name}`, '-out', `${name}.crt`]);
}

/** A server certificate `<name>.crt` (key `<name>.key`) signed by the CA `ca`, for the given subjectAltName. */
export function makeServerCert(dir: string, name: string, ca: string, san: string, commonName = name): void {
  writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
  ssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${commonName}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
  const signing = ['-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-days', '2', '-extfile', `${name}.ext`];
  ssl(dir, ['x509', '-req', '-in', `${name}.csr`, ...signing, '-out', `${name}.crt`]);
}
