import { describe, expect, test } from 'bun:test';
import type { NodeFacts } from '../cloud/node-rules.ts';
import type { ConfigError } from '../config-file/yaml-load.ts';
import { loadStaticConfig, validateStaticConfig } from '../../providers/static/config-load.ts';
import { loadProxmoxConfig } from '../../providers/proxmox/config-load.ts';
import { ruleEffects } from './evaluate.ts';
import { compileSelector } from './selector.ts';

// The nodeRules section: its checks (with path and line, through a provider's loader), the
// selector over facts, and what the matching rules give a machine.

const noSecrets = { readFile: (p: string) => { throw new Error(`ENOENT ${p}`); }, env: () => undefined };

const INVENTORY = `inventory:
  defaults: { region: eu }
  machines:
    - { id: gpu-1, zone: z1, instanceType: gpu.large, labels: { example.com/gpu: a100 } }
    - { id: web-1, zone: z2, instanceType: small }
    - { id: old-1, decommissioned: true, labels: { example.com/gpu: k80 } }
`;

function load(rules: string) {
  return loadStaticConfig(INVENTORY + rules, noSecrets);
}
function errors(rules: string): string[] {
  const r = load(rules);
  if (r.ok) throw new Error('expected the config to be rejected');
  return r.errors.map((e: ConfigError) => `${e.line}: ${e.path}: ${e.message}`);
}
const facts = (values: Record<string, string>, extra: Partial<NodeFacts> = {}): NodeFacts => ({ values, ...extra });

describe('nodeRules checks', () => {
  test('node-role.kubernetes.io is allowed; every other reserved key is refused with its path and line', () => {
    expect(errors(`nodeRules:
  - name: workers
    labels:
      node-role.kubernetes.io/worker: ""
      node.kubernetes.io/instance-type: big
    annotations: { kubernetes.io/description: x, node.edge-ccm.io/rule-labels: x }
    taints:
      - { key: node.cloudprovider.kubernetes.io/uninitialized, effect: NoSchedule }
      - { key: node-role.kubernetes.io/gpu, effect: NoSchedule }
`)).toEqual([
      '11: nodeRules[0].labels["node.kubernetes.io/instance-type"]: label key "node.kubernetes.io/instance-type" is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains); of those, rules may set only node-role.kubernetes.io/*',
      '12: nodeRules[0].annotations["kubernetes.io/description"]: annotation key "kubernetes.io/description" is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains); of those, rules may set only node-role.kubernetes.io/*',
      '12: nodeRules[0].annotations["node.edge-ccm.io/rule-labels"]: annotation key "node.edge-ccm.io/rule-labels": node.edge-ccm.io/ is where the node controller records what it set; no rule may write there',
      '14: nodeRules[0].taints[0]: taint key "node.cloudprovider.kubernetes.io/uninitialized" is in a namespace Kubernetes reserves (kubernetes.io, k8s.io and their subdomains); of those, rules may set only node-role.kubernetes.io/*',
    ]);
  });

  test('selectors: unknown facts (with a suggestion), values that do not fit the operator, a bad regular expression, an empty term; duplicate names; a rule that applies nothing', () => {
    expect(errors(`nodeRules:
  - name: a
    nodeSelector:
      - matchExpressions:
          - { key: zonee, operator: In, values: [z1] }
          - { key: pool, operator: Exists }
          - { key: zone, operator: Exists, values: [z1] }
          - { key: region, operator: In }
          - { key: name, operator: Regexp, values: ["(unclosed"] }
      - {}
    labels: { example.com/x: "" }
  - name: a
    taints: [{ key: example.com/t, effect: NoSchedule }, { key: example.com/t, value: v, effect: NoSchedule }]
  - name: b
`)).toEqual([
      '11: nodeRules[0].nodeSelector[0].matchExpressions[0].key: unknown fact "zonee" (did you mean zone?): the static provider knows name, id, providerID, region, zone, instanceType, hostname, site, rack, label:KEY',
      '12: nodeRules[0].nodeSelector[0].matchExpressions[1].key: unknown fact "pool": the static provider knows name, id, providerID, region, zone, instanceType, hostname, site, rack, label:KEY',
      '13: nodeRules[0].nodeSelector[0].matchExpressions[2].values: must be left out with operator Exists',
      '14: nodeRules[0].nodeSelector[0].matchExpressions[3].values: must list at least one value with operator In',
      '15: nodeRules[0].nodeSelector[0].matchExpressions[4].values[0]: invalid regular expression: missing )',
      '16: nodeRules[0].nodeSelector[1]: a term must have at least one requirement (matchExpressions or matchLabels); leave nodeSelector out to select every machine',
      '18: nodeRules[1].name: duplicate rule name "a" (also nodeRules[0])',
      '19: nodeRules[1].taints[1]: taint example.com/t:NoSchedule is given twice in this rule (also taints[0]): a node holds one taint per key and effect',
      '20: nodeRules[2]: the rule applies nothing: give labels, annotations or taints',
    ]);
  });

  test('proxmox has no inventory labels but tags, pool and host', () => {
    const r = loadProxmoxConfig(`clusters: []
nodeRules:
  - name: x
    nodeSelector: [{ matchLabels: { a: b } }, { matchExpressions: [{ key: tags, operator: In, values: [gpu] }, { key: pool, operator: Exists }] }]
    labels: { a: b }
`);
    expect(r.ok ? [] : r.errors.map((e) => `${e.path}: ${e.message}`)).toContain('nodeRules[0].nodeSelector[0].matchLabels: the proxmox provider has no inventory labels to match');
    expect(r.ok ? [] : r.errors.map((e) => e.path)).not.toContain('nodeRules[0].nodeSelector[1].matchExpressions[0].key');
  });

  test('validate warns of a rule no machine in service matches (a decommissioned one does not count), with its path and line', () => {
    const r = validateStaticConfig(INVENTORY + `nodeRules:
  - name: gpus
    nodeSelector: [{ matchLabels: { example.com/gpu: a100 } }]
    labels: { node-role.kubernetes.io/gpu: "" }
  - name: k80s
    nodeSelector: [{ matchLabels: { example.com/gpu: k80 } }]
    labels: { node-role.kubernetes.io/gpu: "" }
`, undefined, noSecrets);
    expect(r).toEqual({ ok: true, warnings: [{ path: 'nodeRules[1].name', line: 11, message: 'node rule "k80s" matches no machine in service of the inventory', reason: 'NodeRuleMatchesNoMachine' }] });
  });
});

describe('selectors and effects', () => {
  const rules = (yaml: string) => {
    const r = load(yaml);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    return r.config.nodeRules;
  };

  test('terms are ORed, requirements ANDed; NotIn holds for an absent fact; Glob is anchored, Regexp is not', () => {
    const gpu = facts({ name: 'gpu-1', zone: 'z1' }, { labels: { 'example.com/gpu': 'a100' }, tags: ['k8s', 'ceph'] });
    const web = facts({ name: 'web-1', zone: 'z2' });
    const sel = (terms: Parameters<typeof compileSelector>[0]) => compileSelector(terms);
    expect(sel(undefined)(web)).toBe(true);
    expect(sel([[{ key: 'name', operator: 'Glob', values: ['gpu-*'] }]])(gpu)).toBe(true);
    expect(sel([[{ key: 'name', operator: 'Glob', values: ['gpu'] }]])(gpu)).toBe(false);
    expect(sel([[{ key: 'name', operator: 'Regexp', values: ['pu-'] }]])(gpu)).toBe(true);
    expect(sel([[{ key: 'zone', operator: 'In', values: ['z1'] }, { key: 'name', operator: 'In', values: ['web-1'] }]])(gpu)).toBe(false);
    expect(sel([[{ key: 'zone', operator: 'In', values: ['z9'] }], [{ key: 'label:example.com/gpu', operator: 'Exists', values: [] }]])(gpu)).toBe(true);
    expect(sel([[{ key: 'label:example.com/gpu', operator: 'NotIn', values: ['a100'] }]])(web)).toBe(true);
    expect(sel([[{ key: 'label:example.com/gpu', operator: 'DoesNotExist', values: [] }]])(gpu)).toBe(false);
    expect(sel([[{ key: 'tags', operator: 'In', values: ['ceph'] }]])(gpu)).toBe(true);
    expect(sel([[{ key: 'tags', operator: 'NotIn', values: ['ceph'] }]])(gpu)).toBe(false);
    // An empty fact counts as absent (static's region when none is set).
    expect(sel([[{ key: 'region', operator: 'Exists', values: [] }]])(facts({ region: '' }))).toBe(false);
  });

  test('every matching rule applies in order: a later value for a key (or a taint key and effect) wins', () => {
    const r = rules(`nodeRules:
  - name: all
    labels: { node-role.kubernetes.io/worker: "", example.com/tier: base }
    taints: [{ key: example.com/t, value: a, effect: NoSchedule }]
  - name: gpu
    nodeSelector: [{ matchExpressions: [{ key: instanceType, operator: Glob, values: ["gpu.*"] }] }]
    labels: { example.com/tier: gpu }
    annotations: { example.com/note: gpu }
    taints: [{ key: example.com/t, value: b, effect: NoSchedule }, { key: example.com/t, effect: NoExecute }]
`);
    expect(ruleEffects(r, facts({ instanceType: 'gpu.large' }))).toEqual({
      labels: { 'node-role.kubernetes.io/worker': '', 'example.com/tier': 'gpu' },
      annotations: { 'example.com/note': 'gpu' },
      taints: [{ key: 'example.com/t', value: 'b', effect: 'NoSchedule' }, { key: 'example.com/t', value: '', effect: 'NoExecute' }],
    });
    expect(ruleEffects(r, facts({ instanceType: 'small' })).labels).toEqual({ 'node-role.kubernetes.io/worker': '', 'example.com/tier': 'base' });
  });
});
