/**
 * apiserver's DelegatingAuthenticationOptions and DelegatingAuthorizationOptions beyond the
 * kubeconfig, skip-lookup and always-allow flags in flags.ts: cache lifetimes of the reviews, and
 * the client-certificate and front-proxy (request header) authenticators.
 */
import * as v from 'valibot';
import { formatGoDuration } from '../util/duration.ts';
import { flag } from './flag-def.ts';

const notNegative = v.pipe(
  v.number(),
  v.check((ms: number) => ms >= 0, (issue) => `must not be negative, got ${formatGoDuration(issue.input as number)}`),
);

export const AUTH_FLAGS = [
  flag({
    name: 'authentication-token-webhook-cache-ttl',
    key: 'authenticationTokenWebhookCacheTtlMs',
    kind: 'duration',
    default: 10_000,
    group: 'authentication',
    help: 'The duration to cache responses from the webhook token authenticator.',
    schema: notNegative,
  }),
  flag({
    name: 'authentication-tolerate-lookup-failure',
    key: 'authenticationTolerateLookupFailure',
    kind: 'bool',
    default: false,
    group: 'authentication',
    help:
      'If true, failures to look up missing authentication configuration from the cluster are not considered fatal. ' +
      'Note that this can result in authentication that treats all requests as anonymous.',
    inert: 'edge-ccm looks nothing up in the cluster (it reads no extension-apiserver-authentication ConfigMap), so no lookup can fail',
  }),
  flag({
    name: 'client-ca-file',
    key: 'clientCaFile',
    kind: 'string',
    default: '',
    group: 'authentication',
    help:
      'If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file ' +
      'is authenticated with an identity corresponding to the CommonName of the client certificate.',
  }),
  flag({
    name: 'requestheader-allowed-names',
    key: 'requestheaderAllowedNames',
    kind: 'list',
    default: [],
    group: 'authentication',
    help:
      'List of client certificate common names to allow to provide usernames in headers specified by ' +
      '--requestheader-username-headers. If empty, any client certificate validated by the authorities in ' +
      '--requestheader-client-ca-file is allowed.',
  }),
  flag({
    name: 'requestheader-client-ca-file',
    key: 'requestheaderClientCaFile',
    kind: 'string',
    default: '',
    group: 'authentication',
    help:
      'Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames ' +
      'in headers specified by --requestheader-username-headers. WARNING: generally do not depend on authorization ' +
      'being already done for incoming requests.',
  }),
  flag({
    name: 'requestheader-extra-headers-prefix',
    key: 'requestheaderExtraHeadersPrefix',
    kind: 'list',
    default: ['x-remote-extra-'],
    group: 'authentication',
    help: 'List of request header prefixes to inspect. X-Remote-Extra- is suggested.',
  }),
  flag({
    name: 'requestheader-group-headers',
    key: 'requestheaderGroupHeaders',
    kind: 'list',
    default: ['x-remote-group'],
    group: 'authentication',
    help: 'List of request headers to inspect for groups. X-Remote-Group is suggested.',
  }),
  flag({
    name: 'requestheader-uid-headers',
    key: 'requestheaderUidHeaders',
    kind: 'list',
    default: [],
    group: 'authentication',
    help: 'List of request headers to inspect for UIDs. X-Remote-Uid is suggested. Requires the RemoteRequestHeaderUID feature to be enabled.',
  }),
  flag({
    name: 'requestheader-username-headers',
    key: 'requestheaderUsernameHeaders',
    kind: 'list',
    default: ['x-remote-user'],
    group: 'authentication',
    help: 'List of request headers to inspect for usernames. X-Remote-User is common.',
  }),
  flag({
    name: 'authorization-webhook-cache-authorized-ttl',
    key: 'authorizationWebhookCacheAuthorizedTtlMs',
    kind: 'duration',
    default: 10_000,
    group: 'authorization',
    help: "The duration to cache 'authorized' responses from the webhook authorizer.",
    schema: notNegative,
  }),
  flag({
    name: 'authorization-webhook-cache-unauthorized-ttl',
    key: 'authorizationWebhookCacheUnauthorizedTtlMs',
    kind: 'duration',
    default: 10_000,
    group: 'authorization',
    help: "The duration to cache 'unauthorized' responses from the webhook authorizer.",
    schema: notNegative,
  }),
] as const;
