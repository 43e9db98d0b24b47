import type { KeyObject, X509Certificate } from 'node:crypto';
import type { ConfigPath, ReportIssue } from '../../config-file/issues.ts';
import { processSecrets, type SecretSource } from '../../config-file/secrets.ts';
import { resolveCredentialPath } from '../../util/credentials-directory.ts';
import { errorMessage } from '../../util/errors.ts';
import type { HealthCheckFiles } from './health-check-config.ts';
import { ANONYMOUS_UNVERIFIED, type HealthRequest } from './health-connection.ts';

/**
 * The files `controlPlaneEndpoint.healthCheck` names, read once at `edge-ccm vip`'s start and
 * checked for what they must hold (a certificate, a key that belongs to it, a one-line token), so
 * a wrong file is a start-up error naming its key and line rather than a check that fails forever.
 * Problems name the file and the reason, never its content (a key or a token). Files are read
 * as the providers' secret files are (bounded, regular files only, `${CREDENTIALS_DIRECTORY}/NAME`).
 */

/** What the check sends and verifies; undefined when a file has a problem (each reported at its key). */
export function readHealthCredentials(files: HealthCheckFiles | undefined, report: ReportIssue, source: SecretSource = processSecrets): HealthRequest | undefined {
  if (!files) return ANONYMOUS_UNVERIFIED;
  let problems = 0;
  const at = (key: keyof HealthCheckFiles): ConfigPath => ['controlPlaneEndpoint', 'healthCheck', key];
  /** The file's text and what `parse` read from it (it throws what is wrong); undefined (reported) when unreadable or wrong. */
  const read = <T>(key: keyof HealthCheckFiles, parse: (text: string) => T): { text: string; value: T } | undefined => {
    const file = files[key];
    if (!file) return undefined;
    try {
      const text = source.readFile(resolveCredentialPath(file, (name) => source.env(name)));
      return { text, value: parse(text) };
    } catch (e) {
      problems += 1;
      report(at(key), `${file}: ${errorMessage(e)}`);
      return undefined;
    }
  };
  const ca = read('caFile', certificate);
  const cert = read('clientCertificateFile', certificate);
  const key = read('clientKeyFile', privateKey);
  const token = read('tokenFile', bearerToken);
  if (cert && key && !cert.value.checkPrivateKey(key.value)) {
    problems += 1;
    report(at('clientKeyFile'), `${files.clientKeyFile}: not the key of ${files.clientCertificateFile}'s certificate`);
  }
  if (problems > 0) return undefined;
  return {
    tls: {
      rejectUnauthorized: ca !== undefined,
      ...(ca ? { ca: ca.text } : {}),
      ...(files.serverName ? { serverName: files.serverName } : {}),
      ...(cert && key ? { cert: cert.text, key: key.text } : {}),
    },
    headers: token ? { authorization: `Bearer ${token.value}` } : {},
  };
}

/**
 * node:crypto, loaded the first time a file is checked: the default check (anonymous, unverified)
 * names no file, and a vip that never loads node:crypto holds 1.3 MiB less heap and 1.9 MiB less
 * mapped code (BENCHMARKS.md, "What the runtime's node modules cost").
 */
function nodeCrypto(): typeof import('node:crypto') {
  return require('node:crypto');
}

function certificate(text: string): X509Certificate {
  try {
    return new (nodeCrypto().X509Certificate)(text);
  } catch {
    throw new Error('holds no PEM certificate');
  }
}

function privateKey(text: string): KeyObject {
  try {
    return nodeCrypto().createPrivateKey(text);
  } catch {
    throw new Error('holds no PEM private key');
  }
}

/** The token, trimmed (written with echo it ends in a newline); one line of visible characters. */
function bearerToken(text: string): string {
  const token = text.trim();
  if (token === '') throw new Error('is empty');
  if (!/^[\x21-\x7e]+$/.test(token)) throw new Error('must hold one token: one line of printable characters, no spaces');
  return token;
}

/** How the check verifies and authenticates, for the start-up log line (no secret in it). */
export function describeHealthRequest(request: HealthRequest): { healthCertificate: string; healthCredential: string } {
  const { tls, headers } = request;
  return {
    healthCertificate: tls.rejectUnauthorized ? `verified${tls.serverName ? ` as ${tls.serverName}` : ''}` : 'not verified',
    healthCredential: tls.cert ? 'client certificate' : headers.authorization ? 'bearer token' : 'none (anonymous)',
  };
}
