import * as v from 'valibot';
import type { ConfigPath } from '../../config-file/issues.ts';
import { isCredentialPath } from '../../util/credentials-directory.ts';

/**
 * `controlPlaneEndpoint.healthCheck`: how the health check reaches an API server that refuses
 * anonymous requests (k3s, RKE2 and Talos run kube-apiserver with --anonymous-auth=false: an
 * anonymous /readyz gets 401 there, forever) and how it verifies the server's certificate. Any
 * authenticated identity may read /readyz (system:public-info-viewer is bound to
 * system:authenticated), so the credential needs no role. Only file names here: the files are
 * read by `edge-ccm vip` at its start (health-credentials.ts), never by the controller, which
 * validates this section too but does not run the check.
 */

/** An absolute path, or `${CREDENTIALS_DIRECTORY}/NAME` (systemd's LoadCredential=). */
const filePath = v.pipe(
  v.string(),
  v.check((s) => s.startsWith('/') || isCredentialPath(s), 'must be an absolute path or ${CREDENTIALS_DIRECTORY}/NAME'),
);

export const HealthCheckSchema = v.strictObject({
  /** Verify the API server's certificate against this CA bundle (PEM); without it, not verified. */
  caFile: v.optional(filePath),
  /** The name the certificate must carry; default the health URL's host. */
  serverName: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9.:-]{1,253}$/, 'must be a host name or IP address'))),
  clientCertificateFile: v.optional(filePath),
  clientKeyFile: v.optional(filePath),
  /** A bearer token (one line). */
  tokenFile: v.optional(filePath),
});
export type HealthCheckFiles = v.InferOutput<typeof HealthCheckSchema>;

/**
 * What needs the section's other keys or more than one of these: pairs that go together, one
 * credential, and nothing of it over plain HTTP (a token would travel in clear; a CA would
 * verify nothing). Each problem reported at its key, relative to controlPlaneEndpoint.
 */
export function checkHealthCheck(h: HealthCheckFiles | undefined, healthURL: string | undefined, problem: (path: ConfigPath, message: string) => void): void {
  if (!h) return;
  const at = (key: string): ConfigPath => ['healthCheck', key];
  if (h.clientCertificateFile && !h.clientKeyFile) problem(at('clientKeyFile'), 'is needed with clientCertificateFile');
  if (h.clientKeyFile && !h.clientCertificateFile) problem(at('clientCertificateFile'), 'is needed with clientKeyFile');
  if (h.tokenFile && (h.clientCertificateFile || h.clientKeyFile)) problem(at('tokenFile'), 'give one credential: a client certificate or a token, not both');
  // Whatever answers on the port would be handed the token: only to a verified server.
  if (h.tokenFile && !h.caFile) problem(at('caFile'), 'is needed with tokenFile: a bearer token goes only to a server whose certificate is verified');
  if (h.serverName && !h.caFile) problem(at('serverName'), 'needs caFile: the name is checked only when the certificate is verified');
  if (healthURL?.startsWith('http:') && Object.keys(h).length > 0) problem(at(Object.keys(h)[0]!), 'needs an https healthURL (this one is plain http)');
}
