import type { Options } from '../options/index.ts';
import type { DelegatingAuthOptions } from '../server/delegating-auth.ts';
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
