import type { ConfigIssue, ReportIssue } from '../../src/config-file/issues.ts';
import { SecretFiles, type ConfigWarningIssue, type SecretSource } from '../../src/config-file/secrets.ts';
import { resolveAddressPolicy } from '../../src/node-addresses/select.ts';
import { resolveSharedSections } from '../../src/config-sections.ts';
import { LXD_FACTS } from './facts.ts';
import { DEFAULT_LXD_SOCKET, type LxdConfig, type LxdEndpoint } from './config-model.ts';
import type { ResolvableLxdConfig } from './config-schema.ts';

/**
 * Second pass: socket or URL (not both), the client certificate and key for HTTPS, CA or pinned
 * fingerprint, projects or all projects, defaults. Every problem names the key at fault.
 */

export const DEFAULTS = {
  timeoutSeconds: 5,
  cacheSeconds: 5,
  maxBackoffSeconds: 30,
  instanceTypeKey: 'user.instance-type',
} as const;

export function resolveLxdConfig(raw: ResolvableLxdConfig, secrets: SecretSource): { config: LxdConfig; issues: ConfigIssue[]; warnings: ConfigWarningIssue[] } {
  const issues: ConfigIssue[] = [];
  const files = new SecretFiles(secrets);
  const report: ReportIssue = (path, message) => issues.push({ path, message });

  if (raw.projects !== undefined && raw.allProjects) report(['allProjects'], 'cannot be combined with projects: list projects, or take them all');
  const a = raw.addresses ?? {};
  const addresses = resolveAddressPolicy(a, report);

  return {
    config: {
      endpoint: resolveEndpoint(raw, report, files),
      region: raw.region ?? '',
      projects: raw.allProjects ? 'all' : (raw.projects ?? ['default']),
      filter: raw.filter ?? '',
      instanceTypeKey: raw.instanceTypeKey ?? DEFAULTS.instanceTypeKey,
      addresses: { interfaces: a.interfaces ?? [], ...addresses },
      timeoutMs: (raw.timeoutSeconds ?? DEFAULTS.timeoutSeconds) * 1000,
      cacheMs: (raw.cacheSeconds ?? DEFAULTS.cacheSeconds) * 1000,
      maxBackoffMs: (raw.maxBackoffSeconds ?? DEFAULTS.maxBackoffSeconds) * 1000,
      ...resolveSharedSections(raw, report, files, LXD_FACTS),
    },
    issues,
    warnings: files.warnings,
  };
}

function resolveEndpoint(raw: ResolvableLxdConfig, report: ReportIssue, files: SecretFiles): LxdEndpoint {
  const httpsOnly = (['clientCertFile', 'clientKeyFile', 'caFile', 'fingerprint'] as const).filter((k) => raw[k] !== undefined);
  if (raw.url === undefined) {
    if (raw.socket !== undefined || !httpsOnly.length) {
      for (const k of httpsOnly) report([k], 'is for an https url only: the unix socket needs no certificate');
      return { kind: 'unix', socket: raw.socket ?? DEFAULT_LXD_SOCKET };
    }
    report([], `url is required with ${httpsOnly.join(', ')} (or drop them to use the unix socket ${DEFAULT_LXD_SOCKET})`);
    return { kind: 'unix', socket: DEFAULT_LXD_SOCKET };
  }
  if (raw.socket !== undefined) report(['socket'], 'cannot be combined with url: choose the unix socket or the HTTPS endpoint');
  const url = new URL(raw.url);
  if (url.protocol !== 'https:') report(['url'], 'must be an https URL (LXD authenticates clients by their TLS certificate)');
  if (url.pathname.replace(/\/+$/, '') !== '' || url.search) report(['url'], 'must be the server only, e.g. https://lxd1.example.com:8443 (/1.0 is added)');
  if (raw.clientCertFile === undefined) report([], 'clientCertFile is required with url: the certificate the LXD server trusts (lxc config trust add)');
  if (raw.clientKeyFile === undefined) report([], 'clientKeyFile is required with url: the key of clientCertFile');
  if (raw.caFile === undefined && raw.fingerprint === undefined) {
    report([], 'caFile or fingerprint is required with url: how the server certificate is trusted (fingerprint: as `lxc info` prints it)');
  }
  const read = (key: 'clientCertFile' | 'clientKeyFile' | 'caFile', secret: boolean): string | undefined => {
    const file = raw[key];
    if (file === undefined) return undefined;
    try {
      return files.read(file, key, [key], secret);
    } catch (e) {
      report([key], `cannot read ${key} ${file}: ${(e as Error).message}`);
      return undefined;
    }
  };
  return {
    kind: 'https',
    url: `${url.protocol}//${url.host}`,
    clientCert: read('clientCertFile', false) ?? '',
    clientKey: read('clientKeyFile', true) ?? '',
    ca: read('caFile', false),
    fingerprint: raw.fingerprint === undefined ? undefined : normalizeFingerprint(raw.fingerprint),
  };
}

export function normalizeFingerprint(text: string): string {
  return text.replaceAll(':', '').toUpperCase().match(/../g)!.join(':');
}
