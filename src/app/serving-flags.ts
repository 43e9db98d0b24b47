import { readFileSync } from 'node:fs';
import type { Options } from '../options/index.ts';
import { clientCertificateAuthenticator, parseBundle, type ClientCertificateAuthenticator } from '../server/auth/client-certificates.ts';
import type { DelegatingAuthOptions } from '../server/auth/delegating.ts';
import type { ServerOptions } from '../server/server.ts';

/** The secure-serving flags beyond address, port and the default pair, as createServer takes them. */
export function servingTlsFromFlags(o: Options): Pick<ServerOptions, 'certDir' | 'sniCertKeys' | 'cipherSuites' | 'minVersion' | 'permitPortSharing'> {
  return {
    certDir: o.certDir || undefined,
    sniCertKeys: o.tlsSniCertKey,
    cipherSuites: o.tlsCipherSuites,
    minVersion: o.tlsMinVersion,
    permitPortSharing: o.permitPortSharing,
  };
}

/** How long reviews are cached: --authentication-token-webhook-cache-ttl, --authorization-webhook-cache-{authorized,unauthorized}-ttl. */
export function reviewCacheTtls(o: Options): Pick<DelegatingAuthOptions, 'tokenSuccessTtlMs' | 'allowTtlMs' | 'denyTtlMs'> {
  return {
    tokenSuccessTtlMs: o.authenticationTokenWebhookCacheTtlMs,
    allowTtlMs: o.authorizationWebhookCacheAuthorizedTtlMs,
    denyTtlMs: o.authorizationWebhookCacheUnauthorizedTtlMs,
  };
}

/**
 * The client-certificate authenticators (--client-ca-file, --requestheader-*), or undefined when
 * neither CA file is given; a CA file that cannot be read or holds no certificate throws, naming its flag.
 */
export function clientCertificatesFromFlags(o: Options): ClientCertificateAuthenticator | undefined {
  if (!o.clientCaFile && !o.requestheaderClientCaFile) return undefined;
  const bundle = (flag: string, path: string): string => {
    try {
      const pem = readFileSync(path, 'utf8');
      parseBundle(pem);
      return pem;
    } catch (e) {
      throw new Error(`${flag}: cannot use ${path}: ${(e as Error).message}`);
    }
  };
  return clientCertificateAuthenticator({
    ...(o.clientCaFile ? { clientCaPem: bundle('--client-ca-file', o.clientCaFile) } : {}),
    ...(o.requestheaderClientCaFile
      ? {
          requestHeader: {
            caBundlePem: bundle('--requestheader-client-ca-file', o.requestheaderClientCaFile),
            allowedNames: o.requestheaderAllowedNames,
            usernameHeaders: o.requestheaderUsernameHeaders,
            uidHeaders: o.requestheaderUidHeaders,
            groupHeaders: o.requestheaderGroupHeaders,
            extraHeaderPrefixes: o.requestheaderExtraHeadersPrefix,
          },
        }
      : {}),
  });
}
