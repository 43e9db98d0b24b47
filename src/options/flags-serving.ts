/**
 * Serving flags beyond the basic ones in flags.ts: apiserver's SecureServingOptions (TLS versions,
 * suites, SNI, --cert-dir, HTTP/2 and socket sharing) and the cloud-provider's webhook serving
 * group, which has nothing to serve here. Names, types and defaults as upstream.
 */
import * as v from 'valibot';
import { parseIP } from '../net/ip.ts';
import { parseNamedCertKey } from '../server/tls/sni-cert-keys.ts';
import { minVersionSecureOptions, opensslCipherList } from '../server/tls/options.ts';
import { flag } from './flag-def.ts';
import { UPSTREAM_TLS_CIPHER_SUITES, UPSTREAM_TLS_VERSIONS } from '../server/tls/upstream-tls-names.ts';

const ipAddress = v.pipe(
  v.string(),
  v.check((s: string) => parseIP(s) !== undefined, (issue) => `invalid IP address ${JSON.stringify(issue.input)}`),
);
const curveIDs = v.pipe(
  v.array(v.string()),
  v.check((ids: string[]) => ids.every((id) => /^\d+$/.test(id.trim()) && Number(id) <= 0xffff), 'must be TLS curve IDs (numbers such as 23 for P-256, 29 for X25519)'),
);
const cipherSuites = v.pipe(
  v.array(v.string()),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const result = opensslCipherList(dataset.value);
    if (!result.ok) addIssue({ message: result.error });
  }),
);
const minVersion = v.pipe(
  v.string(),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const result = minVersionSecureOptions(dataset.value);
    if (!result.ok) addIssue({ message: result.error });
  }),
);
const namedCertKeys = v.pipe(
  v.array(v.string()),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    for (const entry of dataset.value) {
      const parsed = parseNamedCertKey(entry);
      if (!parsed.ok) addIssue({ message: parsed.error });
    }
  }),
);
const port = v.pipe(
  v.number(),
  v.check((n: number) => n >= 0 && n <= 65535, (issue) => `${issue.input} must be between 0 and 65535, inclusive. 0 for turning off secure port`),
);

const NO_WEBHOOKS =
  'edge-ccm serves no admission webhooks (upstream serves them only with the CloudControllerManagerWebhook gate and webhooks a provider registers)';
const HTTP1_ONLY = 'the serving port speaks HTTP/1.1 only (Bun.serve), so there is no HTTP/2 to tune or turn off';

export const SERVING_FLAGS = [
  flag({
    name: 'cert-dir',
    key: 'certDir',
    kind: 'string',
    default: '',
    group: 'secure serving',
    help:
      'The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are provided, ' +
      'this flag will be ignored. Without it the self-signed pair is kept in memory; with it, it is written there ' +
      '(cloud-controller-manager.crt/.key) and reused on restart.',
  }),
  flag({
    name: 'tls-cipher-suites',
    key: 'tlsCipherSuites',
    kind: 'list',
    default: [],
    group: 'secure serving',
    help:
      'Comma-separated list of cipher suites for the server, by their Go names. If omitted, the TLS library\'s ' +
      'defaults are used. As in Go, the list governs TLS 1.2; TLS 1.3 always offers its three AEAD suites.\n' +
      `Possible values: ${UPSTREAM_TLS_CIPHER_SUITES.join(',')}. Suites edge-ccm's TLS library (BoringSSL) does not ` +
      'have (RC4, TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA, TLS_RSA_WITH_AES_128_CBC_SHA256) are refused.',
    schema: cipherSuites,
  }),
  flag({
    name: 'tls-curve-preferences',
    key: 'tlsCurvePreferences',
    kind: 'list',
    default: [],
    group: 'secure serving',
    typeName: 'int32Slice',
    help: 'Comma-separated list of TLS curve IDs (Go tls.CurveID values) for the server.',
    inert: "Bun's TLS options have no curve preference; the library's default key exchange groups are offered",
    schema: curveIDs,
  }),
  flag({
    name: 'tls-min-version',
    key: 'tlsMinVersion',
    kind: 'string',
    default: '',
    group: 'secure serving',
    help:
      `Minimum TLS version supported. Possible values: ${UPSTREAM_TLS_VERSIONS.join(', ')}. TLS 1.0 and 1.1 are ` +
      'never offered here (the default and lowest minimum is TLS 1.2, as Go\'s for servers).',
    schema: minVersion,
  }),
  flag({
    name: 'tls-sni-cert-key',
    key: 'tlsSniCertKey',
    kind: 'repeated',
    default: [],
    group: 'secure serving',
    typeName: 'namedCertKey',
    help:
      'A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns ' +
      'which are fully qualified domain names, possibly with prefixed wildcard segments. If no domain patterns ' +
      'are provided, the names of the certificate are extracted. The domain patterns also allow IP addresses, but ' +
      'IPs should only be used if the apiserver has visibility to the IP address requested by a client. If multiple ' +
      'key/certificate pairs are given, the first one found for a name wins. Examples: "example.crt,example.key" ' +
      'or "foo.crt,foo.key:*.foo.com,foo.com".',
    schema: namedCertKeys,
  }),
  flag({
    name: 'disable-http2-serving',
    key: 'disableHttp2Serving',
    kind: 'bool',
    default: false,
    group: 'secure serving',
    help: 'If true, HTTP2 serving will be disabled.',
    inert: HTTP1_ONLY,
  }),
  flag({
    name: 'http2-max-streams-per-connection',
    key: 'http2MaxStreamsPerConnection',
    kind: 'int',
    default: 0,
    group: 'secure serving',
    typeName: 'int',
    help: "The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use golang's default.",
    inert: HTTP1_ONLY,
    schema: v.pipe(v.number(), v.check((n: number) => n >= 0, (issue) => `must not be negative, got ${issue.input}`)),
  }),
  flag({
    name: 'permit-address-sharing',
    key: 'permitAddressSharing',
    kind: 'bool',
    default: false,
    group: 'secure serving',
    help:
      'If true, SO_REUSEADDR will be used when binding the port. This allows binding to wildcard IPs like 0.0.0.0 ' +
      'and specific IPs in parallel, and it avoids waiting for the kernel to release sockets in TIME_WAIT state.',
    inert: 'the listening socket always sets SO_REUSEADDR (Bun.serve), so this is already the behaviour',
  }),
  flag({
    name: 'permit-port-sharing',
    key: 'permitPortSharing',
    kind: 'bool',
    default: false,
    group: 'secure serving',
    help:
      'If true, SO_REUSEPORT will be used when binding the port, which allows more than one instance to bind on ' +
      'the same address and port.',
  }),
  // webhook and webhook serving: nothing to serve
  flag({
    name: 'webhooks',
    key: 'webhooks',
    kind: 'list',
    default: [],
    group: 'webhook',
    help:
      "A list of webhooks to enable. '*' enables all on-by-default webhooks, 'foo' enables the webhook named 'foo', " +
      "'-foo' disables the webhook named 'foo'.\nAll webhooks: (none)\nDisabled-by-default webhooks: (none)",
    inert: NO_WEBHOOKS,
    // As upstream, whose list of known webhooks is empty too: any name but '*' is an error.
    schema: v.pipe(
      v.array(v.string()),
      v.rawCheck(({ dataset, addIssue }) => {
        if (!dataset.typed) return;
        for (const name of dataset.value) {
          if (name !== '*') addIssue({ message: `${JSON.stringify(name.replace(/^-/, ''))} is not in the list of known webhooks (there are none)` });
        }
      }),
    ),
  }),
  flag({
    name: 'webhook-bind-address',
    key: 'webhookBindAddress',
    kind: 'string',
    default: '0.0.0.0',
    group: 'webhook serving',
    typeName: 'ip',
    help: 'The IP address on which to listen for the --webhook-secure-port port.',
    inert: NO_WEBHOOKS,
    schema: ipAddress,
  }),
  flag({
    name: 'webhook-cert-dir',
    key: 'webhookCertDir',
    kind: 'string',
    default: '',
    group: 'webhook serving',
    help: 'The directory where the TLS certs are located for the webhook server.',
    inert: NO_WEBHOOKS,
  }),
  flag({
    name: 'webhook-disable-http2-serving',
    key: 'webhookDisableHttp2Serving',
    kind: 'bool',
    default: false,
    group: 'webhook serving',
    help: 'If true, HTTP2 serving will be disabled.',
    inert: NO_WEBHOOKS,
  }),
  flag({
    name: 'webhook-secure-port',
    key: 'webhookSecurePort',
    kind: 'int',
    default: 10260,
    group: 'webhook serving',
    typeName: 'int',
    help: "Secure port to serve cloud provider webhooks. If 0, don't serve webhooks at all.",
    inert: NO_WEBHOOKS,
    schema: port,
  }),
  flag({
    name: 'webhook-tls-cert-file',
    key: 'webhookTlsCertFile',
    kind: 'string',
    default: '',
    group: 'webhook serving',
    help: 'File containing the default x509 Certificate for the webhook server.',
    inert: NO_WEBHOOKS,
  }),
  flag({
    name: 'webhook-tls-cipher-suites',
    key: 'webhookTlsCipherSuites',
    kind: 'list',
    default: [],
    group: 'webhook serving',
    help: 'Comma-separated list of cipher suites for the webhook server (Go names, as --tls-cipher-suites).',
    inert: NO_WEBHOOKS,
    schema: v.pipe(
      v.array(v.string()),
      v.check((names: string[]) => names.every((n) => UPSTREAM_TLS_CIPHER_SUITES.includes(n)), 'names a cipher suite that is not supported or does not exist'),
    ),
  }),
  flag({
    name: 'webhook-tls-curve-preferences',
    key: 'webhookTlsCurvePreferences',
    kind: 'list',
    default: [],
    group: 'webhook serving',
    typeName: 'int32Slice',
    help: 'Comma-separated list of TLS curve IDs for the webhook server.',
    inert: NO_WEBHOOKS,
    schema: curveIDs,
  }),
  flag({
    name: 'webhook-tls-min-version',
    key: 'webhookTlsMinVersion',
    kind: 'string',
    default: '',
    group: 'webhook serving',
    help: `Minimum TLS version supported by the webhook server. Possible values: ${UPSTREAM_TLS_VERSIONS.join(', ')}`,
    inert: NO_WEBHOOKS,
    schema: minVersion,
  }),
  flag({
    name: 'webhook-tls-private-key-file',
    key: 'webhookTlsPrivateKeyFile',
    kind: 'string',
    default: '',
    group: 'webhook serving',
    help: 'File containing the default x509 private key matching --webhook-tls-cert-file.',
    inert: NO_WEBHOOKS,
  }),
  flag({
    name: 'webhook-tls-sni-cert-key',
    key: 'webhookTlsSniCertKey',
    kind: 'repeated',
    default: [],
    group: 'webhook serving',
    typeName: 'namedCertKey',
    help: 'A pair of x509 certificate and private key file paths for the webhook server, as --tls-sni-cert-key.',
    inert: NO_WEBHOOKS,
    schema: namedCertKeys,
  }),
] as const;
