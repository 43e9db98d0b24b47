import { labelValueError } from '../../src/kube/labels.ts';
import type { ConfigIssue, ConfigPath, ReportIssue } from '../../src/config-file/issues.ts';
import { SecretFiles, type ConfigWarningIssue, type SecretSource } from '../../src/config-file/secrets.ts';
import { resolveAddressPolicy } from '../../src/node-addresses/select.ts';
import { resolveSharedSections } from '../../src/config-sections.ts';
import { PROXMOX_FACTS } from './facts.ts';
import { PROXMOX_MATCH_CRITERIA, type ClusterAuth, type ProxmoxCluster, type ProxmoxConfig } from './config-model.ts';
import type { RawCluster, ResolvableProxmoxConfig } from './config-schema.ts';
import { INSTANCE_TYPE_PLACEHOLDERS, instanceTypeOf } from './instance-type.ts';

/**
 * Second pass over a config of the right shape: authentication choices, secrets read, TLS
 * settings that exclude each other, unique regions, defaults. Every problem is reported with the
 * path of the value at fault.
 */

export const DEFAULTS = {
  timeoutSeconds: 5,
  cacheSeconds: 5,
  configCacheSeconds: 60,
  qps: 10,
  burst: 20,
  ticketRenewSeconds: 3600,
  maxBackoffSeconds: 30,
  resyncPeriodSeconds: 30,
  instanceTypeFormat: '{cores}VCPU-{memory}',
  instanceTypeTagPrefix: 'instance-type.',
} as const;

export function resolveProxmoxConfig(raw: ResolvableProxmoxConfig, secrets: SecretSource): { config: ProxmoxConfig; issues: ConfigIssue[]; warnings: ConfigWarningIssue[] } {
  const issues: ConfigIssue[] = [];
  const files = new SecretFiles(secrets);
  const report: ReportIssue = (path, message) => issues.push({ path, message });
  const clusters: ProxmoxCluster[] = [];
  const regions = new Map<string, number>();
  raw.clusters.forEach((c, i) => {
    if (!c) return; // a shape error, already reported
    const path: ConfigPath = ['clusters', i];
    const first = regions.get(c.region);
    if (first !== undefined) report([...path, 'region'], `duplicate region ${JSON.stringify(c.region)} (also clusters[${first}]): providerIDs proxmox://REGION/VMID must name one cluster`);
    else regions.set(c.region, i);
    clusters.push(resolveCluster(c, path, report, files));
  });

  const format = raw.instanceType?.format ?? DEFAULTS.instanceTypeFormat;
  const unknown = [...format.matchAll(/\{([^}]*)\}/g)].map(([, name]) => name!).filter((name) => !INSTANCE_TYPE_PLACEHOLDERS.includes(name));
  for (const name of unknown) {
    report(['instanceType', 'format'], `unknown placeholder {${name}} (known: ${INSTANCE_TYPE_PLACEHOLDERS.map((p) => `{${p}}`).join(', ')})`);
  }
  if (unknown.length === 0) {
    // Placeholders give letters, digits and "." only: a small and a large VM tell whether every
    // VM's instance type is a label value (characters, and length).
    const samples = [{ cores: 1, memoryBytes: 1024 ** 3, tags: [] }, { cores: 1024, memoryBytes: 4095.5 * 1024 ** 3, tags: [] }];
    for (const sample of samples.map((vm) => instanceTypeOf(vm, { format, tagPrefix: '' }))) {
      const error = labelValueError(sample);
      if (error === undefined) continue;
      report(['instanceType', 'format'], `gives instance types such as ${JSON.stringify(sample)}, which is not a label value: ${error}`);
      break;
    }
  }

  const a = raw.addresses ?? {};
  const addresses = resolveAddressPolicy(a, report);

  return {
    config: {
      clusters,
      matchBy: raw.matchBy ?? PROXMOX_MATCH_CRITERIA,
      instanceType: { format, tagPrefix: raw.instanceType?.tagPrefix ?? DEFAULTS.instanceTypeTagPrefix },
      addresses: { ...addresses, guestAgent: a.guestAgent ?? true },
      topologyLabelResync: raw.topologyLabelResync ?? false,
      resyncPeriodMs: (raw.resyncPeriodSeconds ?? DEFAULTS.resyncPeriodSeconds) * 1000,
      ...resolveSharedSections(raw, report, files, PROXMOX_FACTS),
    },
    issues,
    warnings: files.warnings,
  };
}

function resolveCluster(c: RawCluster, path: ConfigPath, report: ReportIssue, secrets: SecretFiles): ProxmoxCluster {
  const url = new URL(c.url);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') report([...path, 'url'], 'must be an https URL');
  if (url.protocol === 'http:' && !c.allowInsecureHTTP) {
    report([...path, 'url'], `${url.origin} is plain HTTP, which would send the API token or password unencrypted: use https, or set allowInsecureHTTP: true`);
  }
  if (url.pathname.replace(/\/+$/, '') !== '' || url.search) report([...path, 'url'], 'must be the server only, e.g. https://pve1.example.com:8006 (/api2/json is added)');
  if (c.insecureSkipVerify && (c.caFile !== undefined || c.fingerprint !== undefined)) {
    report([...path, 'insecureSkipVerify'], 'cannot be combined with caFile or fingerprint (they verify the certificate)');
  }
  let ca: string | undefined;
  if (c.caFile !== undefined) ca = readSecret(secrets, c.caFile, [...path, 'caFile'], 'caFile', report, false);
  return {
    region: c.region,
    url: `${url.protocol}//${url.host}`,
    tls: { ca, fingerprint: c.fingerprint === undefined ? undefined : normalizeFingerprint(c.fingerprint), insecureSkipVerify: c.insecureSkipVerify ?? false },
    auth: resolveAuth(c, path, report, secrets),
    zoneFrom: c.zoneFrom ?? 'host',
    timeoutMs: (c.timeoutSeconds ?? DEFAULTS.timeoutSeconds) * 1000,
    cacheMs: (c.cacheSeconds ?? DEFAULTS.cacheSeconds) * 1000,
    configCacheMs: (c.configCacheSeconds ?? DEFAULTS.configCacheSeconds) * 1000,
    qps: c.qps ?? DEFAULTS.qps,
    burst: c.burst ?? DEFAULTS.burst,
    maxBackoffMs: (c.maxBackoffSeconds ?? DEFAULTS.maxBackoffSeconds) * 1000,
  };
}

/** An API token (preferred) or a user and password; exactly one source for the secret. */
function resolveAuth(c: RawCluster, path: ConfigPath, report: ReportIssue, secrets: SecretFiles): ClusterAuth {
  const tokenFields = [c.tokenSecret, c.tokenSecretFile, c.tokenSecretEnv];
  const passwordFields = [c.password, c.passwordFile, c.passwordEnv];
  const usesToken = c.tokenId !== undefined || tokenFields.some((f) => f !== undefined);
  const usesPassword = c.username !== undefined || passwordFields.some((f) => f !== undefined);
  if (usesToken && usesPassword) {
    report(path, 'choose one authentication: an API token (tokenId and its secret) or username and password, not both');
  } else if (!usesToken && !usesPassword) {
    report(path, 'authentication is required: tokenId with tokenSecretFile (or tokenSecretEnv, tokenSecret), or username with passwordFile (or passwordEnv, password)');
  }
  if (usesToken) {
    if (c.tokenId === undefined) report(path, 'tokenId is required with a token secret');
    const secret = oneSecret(c, path, report, secrets, ['tokenSecret', 'tokenSecretFile', 'tokenSecretEnv']);
    return { kind: 'token', tokenId: c.tokenId ?? '', secret };
  }
  if (c.username === undefined && usesPassword) report(path, 'username is required with a password');
  const password = usesPassword ? oneSecret(c, path, report, secrets, ['password', 'passwordFile', 'passwordEnv']) : '';
  return { kind: 'password', username: c.username ?? '', password, renewMs: (c.ticketRenewSeconds ?? DEFAULTS.ticketRenewSeconds) * 1000 };
}

function oneSecret(
  c: RawCluster,
  path: ConfigPath,
  report: ReportIssue,
  secrets: SecretFiles,
  [inline, file, env]: ['tokenSecret', 'tokenSecretFile', 'tokenSecretEnv'] | ['password', 'passwordFile', 'passwordEnv'],
): string {
  const given = [inline, file, env].filter((k) => c[k] !== undefined);
  if (given.length !== 1) {
    report(path, `exactly one of ${inline}, ${file} or ${env} is required (found ${given.length})`);
    return '';
  }
  const fileName = c[file];
  if (fileName !== undefined) return readSecret(secrets, fileName, [...path, file], file, report, true) ?? '';
  const envName = c[env];
  if (envName !== undefined) {
    const value = secrets.env(envName);
    if (value === undefined) report([...path, env], `environment variable ${envName} (${env}) is not set`);
    return value ?? '';
  }
  return c[inline] ?? '';
}

/** A secret's file (trimmed of its newline, checked for its permissions) or a CA file. */
function readSecret(secrets: SecretFiles, file: string, path: ConfigPath, key: string, report: ReportIssue, secret: boolean): string | undefined {
  try {
    const text = secrets.read(file, key, path, secret);
    return secret ? text.replace(/\r?\n$/, '') : text;
  } catch (e) {
    report(path, `cannot read ${key} ${file}: ${(e as Error).message}`);
    return undefined;
  }
}

export function normalizeFingerprint(text: string): string {
  const hex = text.replaceAll(':', '').toUpperCase();
  return hex.match(/../g)!.join(':');
}
