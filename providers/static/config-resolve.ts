import type { V1NodeAddress } from '@kubernetes/client-node';
import { isKubernetesNamespacedLabel, isNodeRoleKey, labelKeyError, labelValueError } from '../../src/kube/labels.ts';
import { formatIP, formatPrefix, parseIP, parsePrefix, type Prefix } from '../../src/net/ip.ts';
import type { ConfigIssue, ConfigPath, ReportIssue } from '../../src/config-file/issues.ts';
import { SecretFiles, type ConfigWarningIssue, type SecretSource } from '../../src/config-file/secrets.ts';
import { resolveSharedSections } from '../../src/config-sections.ts';
import { unmatchedRules } from '../../src/node-rules/index.ts';
import { STATIC_PROVIDER_ID_PREFIX, type Machine, type RedfishTarget, type StaticConfig } from './config-model.ts';
import { STATIC_MATCH_CRITERIA, type RawDefaults, type RawRedfish, type ResolvableStaticConfig, type SalvagedMachine } from './config-schema.ts';
import { STATIC_FACTS, machineFacts } from './facts.ts';

/**
 * Second pass over a config that has the right shape: gives it meaning (group defaults merged,
 * addresses parsed, duplicates refused, secrets read) and reports every problem with the path
 * of the value at fault. The shared sections (loadBalancer) are resolved by src/config-sections.ts.
 */

export const DEFAULT_REDFISH_TIMEOUT_SECONDS = 5;
export const DEFAULT_REDFISH_CACHE_SECONDS = 30;

export function resolveStaticConfig(raw: ResolvableStaticConfig, secrets: SecretSource): { config: StaticConfig; issues: ConfigIssue[]; warnings: ConfigWarningIssue[] } {
  const issues: ConfigIssue[] = [];
  const report: ReportIssue = (path, message) => issues.push({ path, message });
  const files = new SecretFiles(secrets);
  const machines = resolveMachines(raw, files, report);
  const inv = raw.inventory ?? {};
  const shared = resolveSharedSections(raw, report, files, STATIC_FACTS);
  return {
    config: {
      inventory: { authoritative: inv.authoritative ?? false, matchBy: inv.matchBy ?? STATIC_MATCH_CRITERIA, machines },
      ...shared,
    },
    issues,
    warnings: [...files.warnings, ...unmatchedRuleWarnings(shared.nodeRules, machines)],
  };
}

/** The event reason (and `validate` warning) of a node rule that no machine in service matches: a typo in a selector would otherwise go unnoticed. */
export const NODE_RULE_MATCHES_NO_MACHINE = 'NodeRuleMatchesNoMachine';

function unmatchedRuleWarnings(rules: StaticConfig['nodeRules'], machines: readonly Machine[]): ConfigWarningIssue[] {
  const inService = machines.filter((m) => !m.decommissioned).map(machineFacts);
  return unmatchedRules(rules, inService).map((rule) => ({
    reason: NODE_RULE_MATCHES_NO_MACHINE,
    path: ['nodeRules', rule.index, 'name'],
    message: `node rule ${JSON.stringify(rule.name)} matches no machine in service of the inventory`,
  }));
}

function resolveMachines(raw: ResolvableStaticConfig, readSecret: SecretFiles, report: ReportIssue): Machine[] {
  const inv = raw.inventory ?? {};
  const base: ConfigPath = ['inventory'];
  const sites = inv.sites ?? {};
  const racks = inv.racks ?? {};
  if (inv.defaults) checkLabels(inv.defaults, [...base, 'defaults'], report);
  for (const [name, site] of Object.entries(sites)) checkLabels(site, [...base, 'sites', name], report);
  for (const [name, rack] of Object.entries(racks)) {
    checkLabels(rack, [...base, 'racks', name], report);
    if (rack.site !== undefined && !Object.hasOwn(sites, rack.site)) {
      report([...base, 'racks', name, 'site'], `unknown site ${JSON.stringify(rack.site)} (not in inventory.sites)`);
    }
  }
  const machines: Machine[] = [];
  const seen = new DuplicateTracker(report);
  (inv.machines ?? []).forEach((m, i) => {
    const path: ConfigPath = [...base, 'machines', i];
    if (!m) {
      // A shape error, already reported; its id still counts, so a duplicate is reported with it.
      const id = inv.machineIds?.[i];
      if (id !== undefined) seen.claimId(id, path);
      return;
    }
    checkLabels(m, path, report);
    const rack = m.rack === undefined ? undefined : racks[m.rack];
    if (m.rack !== undefined && !rack) report([...path, 'rack'], `unknown rack ${JSON.stringify(m.rack)} (not in inventory.racks)`);
    if (m.site !== undefined && rack?.site !== undefined && m.site !== rack.site) {
      report([...path, 'site'], `site ${JSON.stringify(m.site)} differs from the site of rack ${JSON.stringify(m.rack)} (${JSON.stringify(rack.site)})`);
    }
    const siteName = m.site ?? rack?.site;
    const site = siteName === undefined ? undefined : sites[siteName];
    if (m.site !== undefined && !site) report([...path, 'site'], `unknown site ${JSON.stringify(m.site)} (not in inventory.sites)`);
    const layers: RawDefaults[] = [inv.defaults ?? {}, site ?? {}, rack ?? {}, m];
    const { machine, addressPaths } = buildMachine(m, siteName, layers, path, report, readSecret);
    seen.check(machine, path, m, addressPaths);
    machines.push(machine);
  });
  return machines;
}

function buildMachine(
  m: SalvagedMachine,
  site: string | undefined,
  layers: RawDefaults[],
  path: ConfigPath,
  report: ReportIssue,
  readSecret: SecretFiles,
): { machine: Machine; addressPaths: ConfigPath[] } {
  const nearest = <K extends keyof RawDefaults>(key: K): RawDefaults[K] => layers.reduce<RawDefaults[K]>((found, l) => l[key] ?? found, undefined);
  const addresses: V1NodeAddress[] = [];
  const addressPaths: ConfigPath[] = [];
  (m.addresses ?? []).forEach((a, j) => {
    if (!a) return; // a shape error, already reported
    const at = [...path, 'addresses', j, 'address'];
    let address = a.address;
    // Canonical text, so matching compares addresses, not spellings (the schema checked they parse).
    if (a.type === 'InternalIP' || a.type === 'ExternalIP') address = formatIP(parseIP(a.address)!);
    addresses.push({ type: a.type, address });
    addressPaths.push(at);
  });
  if (m.hostname !== undefined && !addresses.some((a) => a.type === 'Hostname' && a.address === m.hostname)) {
    addresses.push({ type: 'Hostname', address: m.hostname });
    addressPaths.push([...path, 'hostname']);
  }
  // A machine whose own redfish block failed the schema: its merged settings would be guesses, their errors echoes.
  const redfishBroken = m.invalidKeys?.includes('redfish') ?? false;
  const redfishLayers = redfishBroken ? [] : layers.map((l) => l.redfish).filter((r): r is RawRedfish => r !== undefined);
  const redfishPath = m.redfish ? [...path, 'redfish'] : path;
  const redfish = redfishLayers.length ? resolveRedfish(Object.assign({}, ...redfishLayers) as RawRedfish, redfishPath, report, readSecret) : undefined;
  const machine: Machine = {
    id: m.id,
    providerID: STATIC_PROVIDER_ID_PREFIX + m.id,
    nodeName: m.nodeName ?? m.id,
    hostname: m.hostname,
    site,
    rack: m.rack,
    addresses,
    podCIDRs: resolvePodCIDRs(m, path, report),
    instanceType: nearest('instanceType') ?? '',
    zone: nearest('zone') ?? '',
    region: nearest('region') ?? '',
    labels: Object.assign({}, ...layers.map((l) => l.labels ?? {})) as Record<string, string>,
    power: nearest('power') ?? 'on',
    decommissioned: m.decommissioned ?? false,
    redfish,
  };
  return { machine, addressPaths };
}

/** The machine's pinned pod CIDRs, canonical: at most one per family (the cluster CIDR is the controller's to check). */
function resolvePodCIDRs(m: SalvagedMachine, path: ConfigPath, report: ReportIssue): string[] | undefined {
  if (!m.podCIDRs) return undefined;
  const prefixes = m.podCIDRs.map((c) => parsePrefix(c)!);
  const second = prefixes.findIndex((p, j) => prefixes.findIndex((q) => q.family === p.family) !== j);
  if (second >= 0) report([...path, 'podCIDRs', second], `two IPv${prefixes[second]!.family} pod CIDRs: give at most one IPv4 and one IPv6 CIDR`);
  return prefixes.map(formatPrefix);
}

/** Merged Redfish settings of one machine; undefined (no Redfish) when no layer names an endpoint. */
function resolveRedfish(r: RawRedfish, path: ConfigPath, report: ReportIssue, secrets: SecretFiles): RedfishTarget | undefined {
  if (r.endpoint === undefined) return undefined;
  const where = 'redfish: ';
  const url = new URL(r.endpoint);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') report(path, `${where}endpoint must be an http or https URL`);
  if (url.protocol === 'http:' && !r.allowInsecureHTTP) {
    report(path, `${where}endpoint ${url.origin} is plain HTTP, which would send the credentials unencrypted: use https, or set allowInsecureHTTP: true`);
  }
  if (r.username === undefined) report(path, `${where}username is required (here or in the rack, site or inventory.defaults)`);
  const sources = [r.password !== undefined, r.passwordFile !== undefined, r.passwordEnv !== undefined].filter(Boolean).length;
  if (sources !== 1) report(path, `${where}exactly one of password, passwordFile or passwordEnv is required (found ${sources})`);
  let password = r.password ?? '';
  try {
    if (r.passwordFile !== undefined) password = secrets.read(r.passwordFile, 'passwordFile', path, true).replace(/\r?\n$/, '');
  } catch (e) {
    report(path, `${where}cannot read passwordFile ${r.passwordFile}: ${(e as Error).message}`);
  }
  if (r.passwordEnv !== undefined) {
    const value = secrets.env(r.passwordEnv);
    if (value === undefined) report(path, `${where}environment variable ${r.passwordEnv} (passwordEnv) is not set`);
    password = value ?? '';
  }
  let ca: string | undefined;
  try {
    if (r.caFile !== undefined) ca = secrets.read(r.caFile, 'caFile', path, false);
  } catch (e) {
    report(path, `${where}cannot read caFile ${r.caFile}: ${(e as Error).message}`);
  }
  return {
    endpoint: r.endpoint.replace(/\/+$/, ''),
    systemId: r.systemId,
    auth: r.auth ?? 'basic',
    username: r.username ?? '',
    password,
    ca,
    insecureSkipVerify: r.insecureSkipVerify ?? false,
    timeoutMs: (r.timeoutSeconds ?? DEFAULT_REDFISH_TIMEOUT_SECONDS) * 1000,
    cacheMs: (r.cacheSeconds ?? DEFAULT_REDFISH_CACHE_SECONDS) * 1000,
  };
}

function checkLabels(layer: RawDefaults, path: ConfigPath, report: ReportIssue): void {
  for (const [key, value] of Object.entries(layer.labels ?? {})) {
    const keyError = labelKeyError(key);
    const valueError = labelValueError(value);
    if (keyError !== undefined) report([...path, 'labels', key], `invalid label key ${JSON.stringify(key)}: ${keyError}`);
    else if (isKubernetesNamespacedLabel(key)) {
      // The node controller's own rule: such a label would be dropped at every initialisation.
      // Upstream's rule for a provider's additional labels; the role labels have their own way in.
      const instead = isNodeRoleKey(key) ? ` as an inventory label; set role labels with a nodeRules rule (docs/operations.md, "Node rules")` : '';
      report([...path, 'labels', key], `label key ${JSON.stringify(key)} is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains): the node controller never sets it${instead}`);
    }
    if (valueError !== undefined) report([...path, 'labels', key], `invalid value of label ${JSON.stringify(key)}: ${valueError}`);
  }
}

/**
 * Ids are unique among all machines; node names, hostnames and IP addresses among machines in
 * service (a decommissioned machine's address may already belong to its successor).
 */
class DuplicateTracker {
  private readonly owners = new Map<string, string>();
  private readonly podCIDRs: { prefix: Prefix; where: string }[] = [];
  constructor(private readonly report: ReportIssue) {}

  /** False (and reported) when an earlier machine has this id. */
  claimId(id: string, path: ConfigPath): boolean {
    return this.claim(`id:${id}`, `machines[${path.at(-1)}]`, [...path, 'id'], `duplicate machine id ${JSON.stringify(id)}`);
  }

  check(machine: Machine, path: ConfigPath, raw: SalvagedMachine, addressPaths: ConfigPath[]): void {
    const where = `machines[${path.at(-1)}]`;
    // A repeated id says it all: its node name (the id by default) and addresses would only echo it.
    if (!this.claimId(machine.id, path)) return;
    if (machine.decommissioned) return;
    this.claim(`node:${machine.nodeName}`, where, [...path, raw.nodeName !== undefined ? 'nodeName' : 'id'], `duplicate node name ${JSON.stringify(machine.nodeName)}`);
    machine.podCIDRs?.forEach((cidr, j) => this.claimPodCIDR(parsePrefix(cidr)!, where, [...path, 'podCIDRs', j]));
    machine.addresses.forEach((a, j) => {
      const isIP = a.type === 'InternalIP' || a.type === 'ExternalIP';
      const key = isIP ? `ip:${a.address}` : a.type === 'Hostname' ? `host:${a.address}` : undefined;
      if (key) this.claim(key, where, addressPaths[j]!, `duplicate ${isIP ? 'address' : 'hostname'} ${JSON.stringify(a.address)}`);
    });
  }

  /** Pinned pod CIDRs must not overlap (two nodes would route the same pods). */
  private claimPodCIDR(prefix: Prefix, where: string, path: ConfigPath): void {
    const clash = this.podCIDRs.find((c) => c.prefix.family === prefix.family && c.prefix.first <= prefix.last && prefix.first <= c.prefix.last);
    if (clash) this.report(path, `pod CIDR ${formatPrefix(prefix)} overlaps ${formatPrefix(clash.prefix)} (also in inventory.${clash.where})`);
    else this.podCIDRs.push({ prefix, where });
  }

  /** False (and reported) when another machine has the key already. */
  private claim(key: string, where: string, path: ConfigPath, message: string): boolean {
    const owner = this.owners.get(key);
    if (owner !== undefined && owner !== where) {
      this.report(path, `${message} (also in inventory.${owner})`);
      return false;
    }
    this.owners.set(key, where);
    return true;
  }
}
