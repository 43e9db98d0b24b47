import { parseGoBool } from '../../util/strconv.ts';
import { describe, expect, test } from 'bun:test';
import type { V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { LB_CLEANUP_FINALIZER, loadBalancerStatusEqual, semanticEqual, wantsLoadBalancer, EXCLUDE_FROM_LB_LABEL, TO_BE_DELETED_TAINT, nodeEligibleForLoadBalancer, nodeIncludedInLoadBalancers } from '../../kube/service-helpers.ts';
import { addFinalizerPatch, loadBalancerStatusPatch, removeFinalizerPatch } from './patches.ts';
import { loggableNodeNames, updateFailedMessage } from './events.ts';
import { retryAfterSeconds } from './load-balancer-sync.ts';
import { RetryAfterError } from '../../cloud/types.ts';
import { hasForeignLoadBalancerClass, needsCleanup, needsUpdate, nodesSufficientlyEqual, shouldSyncUpdatedNode } from './predicates.ts';

// ---- fixtures, as upstream's newService/makeNode with tweaks ----

type ServiceTweak = (s: V1Service) => void;

function newService(name: string, type: string, ...tweaks: ServiceTweak[]): V1Service {
  const s: V1Service = {
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: { type, ports: [{ port: 80, protocol: 'TCP', targetPort: 0 }] },
  };
  for (const t of tweaks) t(s);
  return s;
}
const copyService = (s: V1Service, ...tweaks: ServiceTweak[]): V1Service => {
  const c = structuredClone(s);
  for (const t of tweaks) t(c);
  return c;
};
const withPorts = (protocol: string, targetPort: number): ServiceTweak => (s) => {
  s.spec!.ports = [{ port: 80, protocol, targetPort }];
};
const withAppProtocol = (appProtocol: string): ServiceTweak => (s) => {
  for (const p of s.spec!.ports!) p.appProtocol = appProtocol;
};
const withIPFamilies = (...families: string[]): ServiceTweak => (s) => {
  s.spec!.ipFamilies = families;
};
const withFinalizer: ServiceTweak = (s) => {
  s.metadata!.finalizers = [...(s.metadata!.finalizers ?? []), LB_CLEANUP_FINALIZER];
};
const withDeletionTimestamp: ServiceTweak = (s) => {
  s.metadata!.deletionTimestamp = new Date();
};
const withClass = (cls: string): ServiceTweak => (s) => {
  s.spec!.loadBalancerClass = cls;
};

type NodeTweak = (n: V1Node) => void;
const PROVIDER_ID = 'providerID';
function makeNode(...tweaks: NodeTweak[]): V1Node {
  const n: V1Node = {
    metadata: { name: 'node', labels: {} },
    spec: { taints: [], providerID: PROVIDER_ID },
    status: { conditions: [{ type: 'Ready', status: 'True' }] },
  };
  for (const t of tweaks) t(n);
  return n;
}
const named = (name: string): NodeTweak => (n) => {
  n.metadata!.name = name;
};
const tainted = (key: string): NodeTweak => (n) => {
  n.spec!.taints!.push({ key, effect: 'NoSchedule' });
};
const labelled = (key: string, value: string): NodeTweak => (n) => {
  n.metadata!.labels![key] = value;
};
const condition = (type: string, status: string): NodeTweak => (n) => {
  const conditions = n.status!.conditions!;
  const existing = conditions.find((c) => c.type === type);
  if (existing) existing.status = status;
  else conditions.push({ type, status });
};
const ready = (value: boolean) => condition('Ready', value ? 'True' : 'False');
const readyUnset: NodeTweak = (n) => {
  for (const c of n.status!.conditions!) if (c.type === 'Ready') c.type = 'SomethingElse';
};
const deleted: NodeTweak = (n) => {
  n.metadata!.deletionTimestamp = new Date();
};
const providerID = (id: string): NodeTweak => (n) => {
  n.spec!.providerID = id;
};
const excluded = labelled(EXCLUDE_FROM_LB_LABEL, '');

// ---- services ----

describe('wantsLoadBalancer', () => {
  test('only type LoadBalancer without class, or with a class the provider owns', () => {
    expect(wantsLoadBalancer(newService('a', 'LoadBalancer'))).toBe(true);
    expect(wantsLoadBalancer(newService('a', 'ClusterIP'))).toBe(false);
    expect(wantsLoadBalancer(newService('a', 'NodePort'))).toBe(false);
    expect(wantsLoadBalancer(newService('a', 'LoadBalancer', withClass('custom-loadbalancer')))).toBe(false);
    expect(wantsLoadBalancer(newService('a', 'LoadBalancer', withClass('ours')), ['ours'])).toBe(true);
    expect(wantsLoadBalancer(newService('a', 'ClusterIP', withClass('ours')), ['ours'])).toBe(false);
  });

  test('foreign class means set and not owned', () => {
    expect(hasForeignLoadBalancerClass(newService('a', 'LoadBalancer'))).toBe(false);
    expect(hasForeignLoadBalancerClass(newService('a', 'LoadBalancer', withClass('x')))).toBe(true);
    expect(hasForeignLoadBalancerClass(newService('a', 'LoadBalancer', withClass('x')), ['x'])).toBe(false);
  });
});

describe('needsCleanup', () => {
  // finalizer | deleting | wants LB -> cleanup
  const cases: [string, V1Service, boolean][] = [
    ['no finalizer', newService('a', 'NodePort'), false],
    ['no finalizer, wants LB', newService('a', 'LoadBalancer'), false],
    ['no finalizer, deleting', newService('a', 'NodePort', withDeletionTimestamp), false],
    ['no finalizer, deleting, wants LB', newService('a', 'LoadBalancer', withDeletionTimestamp), false],
    ['finalizer, no longer wants LB', newService('a', 'NodePort', withFinalizer), true],
    ['finalizer, wants LB', newService('a', 'LoadBalancer', withFinalizer), false],
    ['finalizer, deleting', newService('a', 'NodePort', withFinalizer, withDeletionTimestamp), true],
    ['finalizer, deleting, wants LB', newService('a', 'LoadBalancer', withFinalizer, withDeletionTimestamp), true],
    ['finalizer, class no longer owned', newService('a', 'LoadBalancer', withFinalizer, withClass('gone')), true],
  ];
  for (const [name, svc, want] of cases) test(name, () => expect(needsCleanup(svc)).toBe(want));
});

describe('needsUpdate', () => {
  const base = () => newService('svc', 'LoadBalancer');
  const ports = (...nums: number[]): V1ServicePort[] => nums.map((port) => ({ port }));
  const cases: [string, V1Service, V1Service, boolean][] = [
    ['type LoadBalancer -> ClusterIP', base(), copyService(base(), (s) => (s.spec!.type = 'ClusterIP')), true],
    ['type ClusterIP -> LoadBalancer', newService('svc', 'ClusterIP'), base(), true],
    ['neither wants a load balancer', newService('svc', 'ClusterIP'), newService('svc', 'NodePort', (s) => (s.spec!.ports = ports(1))), false],
    ['foreign class on both sides', newService('svc', 'LoadBalancer', withClass('x')), newService('svc', 'LoadBalancer', withClass('x'), (s) => (s.spec!.loadBalancerIP = '1.1.1.1')), false],
    ['ports differ', copyService(base(), (s) => (s.spec!.ports = ports(8000, 9000, 10000))), copyService(base(), (s) => (s.spec!.ports = ports(8001, 9001, 10001))), true],
    ['port count differs', base(), copyService(base(), (s) => s.spec!.ports!.push({ port: 81 })), true],
    ['port name differs', base(), copyService(base(), (s) => (s.spec!.ports![0]!.name = 'http')), true],
    ['protocol differs', base(), copyService(base(), withPorts('UDP', 0)), true],
    ['nodePort differs', base(), copyService(base(), (s) => (s.spec!.ports![0]!.nodePort = 30000)), true],
    ['targetPort differs', newService('svc', 'LoadBalancer', withPorts('TCP', 20)), newService('svc', 'LoadBalancer', withPorts('TCP', 21)), true],
    ['targetPort number -> name', newService('svc', 'LoadBalancer', withPorts('TCP', 22)), copyService(newService('svc', 'LoadBalancer', withPorts('TCP', 22)), (s) => (s.spec!.ports![0]!.targetPort = 'dns')), true],
    ['appProtocol the same', base(), copyService(base()), false],
    ['appProtocol set when unset', base(), copyService(base(), withAppProtocol('http')), true],
    ['appProtocol changed', newService('svc', 'LoadBalancer', withAppProtocol('http')), newService('svc', 'LoadBalancer', withAppProtocol('tcp')), true],
    ['source ranges changed', base(), copyService(base(), (s) => (s.spec!.loadBalancerSourceRanges = ['10.0.0.0/8'])), true],
    ['session affinity changed', base(), copyService(base(), (s) => (s.spec!.sessionAffinity = 'ClientIP')), true],
    ['session affinity config changed', base(), copyService(base(), (s) => (s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 60 } })), true],
    ['loadBalancerIP changed', base(), copyService(base(), (s) => (s.spec!.loadBalancerIP = '192.168.1.11')), true],
    ['external IP count differs', copyService(base(), (s) => (s.spec!.externalIPs = ['old.IP.1'])), copyService(base(), (s) => (s.spec!.externalIPs = ['new.IP.1', 'new.IP.2'])), true],
    ['external IPs differ', copyService(base(), (s) => (s.spec!.externalIPs = ['old.IP.1', 'old.IP.2'])), copyService(base(), (s) => (s.spec!.externalIPs = ['new.IP.1', 'new.IP.2'])), true],
    ['annotations changed', base(), copyService(base(), (s) => (s.metadata!.annotations = { a: 'b' })), true],
    ['UID changed', copyService(base(), (s) => (s.metadata!.uid = 'UID old')), copyService(base(), (s) => (s.metadata!.uid = 'UID new')), true],
    ['externalTrafficPolicy changed', base(), copyService(base(), (s) => (s.spec!.externalTrafficPolicy = 'Local')), true],
    ['healthCheckNodePort changed', base(), copyService(base(), (s) => (s.spec!.healthCheckNodePort = 30123)), true],
    ['single stack -> dual stack', newService('svc', 'LoadBalancer', withIPFamilies('IPv4')), newService('svc', 'LoadBalancer', withIPFamilies('IPv4', 'IPv6')), true],
    ['dual stack -> single stack', newService('svc', 'LoadBalancer', withIPFamilies('IPv4', 'IPv6')), newService('svc', 'LoadBalancer', withIPFamilies('IPv4')), true],
    ['IP families unchanged', newService('svc', 'LoadBalancer', withIPFamilies('IPv4')), newService('svc', 'LoadBalancer', withIPFamilies('IPv4')), false],
    ['only labels, status and resourceVersion changed', base(), copyService(base(), (s) => {
      s.metadata!.labels = { app: 'x' };
      s.metadata!.resourceVersion = '42';
      s.status = { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } };
    }), false],
    ['only selector changed', base(), copyService(base(), (s) => (s.spec!.selector = { app: 'y' })), false],
  ];
  for (const [name, oldSvc, newSvc, want] of cases) test(name, () => expect(needsUpdate(oldSvc, newSvc)).toBe(want));

  test('a change of class ownership counts as wanting a load balancer or not', () => {
    const svc = newService('svc', 'LoadBalancer', withClass('ours'));
    expect(needsUpdate(svc, copyService(svc), ['ours'])).toBe(false);
    expect(needsUpdate(svc, copyService(svc, (s) => (s.spec!.loadBalancerIP = '1.1.1.1')), ['ours'])).toBe(true);
  });
});

describe('load balancer status equality and patches', () => {
  test('ingress points are compared, empty and missing are the same', () => {
    expect(loadBalancerStatusEqual({ ingress: [{ ip: '8.8.8.8' }] }, { ingress: [{ ip: '8.8.8.8' }] })).toBe(true);
    expect(loadBalancerStatusEqual(undefined, {})).toBe(true);
    expect(loadBalancerStatusEqual({ ingress: [] }, {})).toBe(true);
    expect(loadBalancerStatusEqual({}, { ingress: [{ ip: '8.8.8.8' }] })).toBe(false);
    expect(loadBalancerStatusEqual({ ingress: [{ ip: '8.8.8.8' }] }, { ingress: [{ ip: '8.8.4.4' }] })).toBe(false);
    expect(loadBalancerStatusEqual({ ingress: [{ ip: '8.8.8.8' }] }, { ingress: [{ ip: '8.8.8.8', hostname: 'lb' }] })).toBe(false);
  });

  test('an IP ingress without ipMode equals the API server default VIP, not Proxy', () => {
    expect(loadBalancerStatusEqual({ ingress: [{ ip: '8.8.8.8', ipMode: 'VIP' }] }, { ingress: [{ ip: '8.8.8.8' }] })).toBe(true);
    expect(loadBalancerStatusEqual({ ingress: [{ ip: '8.8.8.8', ipMode: 'Proxy' }] }, { ingress: [{ ip: '8.8.8.8' }] })).toBe(false);
    expect(loadBalancerStatusEqual({ ingress: [{ hostname: 'lb', ipMode: 'VIP' }] }, { ingress: [{ hostname: 'lb' }] })).toBe(false);
  });

  test('status patch (upstream TestPatchStatus)', () => {
    const ingress = [{ ip: '8.8.8.8' }];
    expect(loadBalancerStatusPatch({ ingress }, { ingress: [{ ip: '8.8.8.8' }] })).toBeUndefined(); // no-op add
    expect(loadBalancerStatusPatch({}, { ingress })).toEqual({ status: { loadBalancer: { ingress } } }); // add
    expect(loadBalancerStatusPatch(undefined, {})).toBeUndefined(); // no-op clear
    expect(loadBalancerStatusPatch({ ingress }, {})).toEqual({ status: { loadBalancer: { ingress: null } } }); // clear
  });

  test('finalizer patches (upstream TestAddFinalizer / TestRemoveFinalizer)', () => {
    const without = newService('svc', 'LoadBalancer', (s) => (s.metadata!.finalizers = ['other']));
    const withIt = copyService(without, withFinalizer);
    expect(addFinalizerPatch(withIt)).toBeUndefined();
    expect(addFinalizerPatch(without)).toEqual({ metadata: { finalizers: [LB_CLEANUP_FINALIZER] } });
    expect(removeFinalizerPatch(without)).toBeUndefined();
    expect(removeFinalizerPatch(withIt)).toEqual({ metadata: { '$deleteFromPrimitiveList/finalizers': [LB_CLEANUP_FINALIZER] } });
  });

  test('semanticEqual treats unset, null, [] and {} alike but compares values', () => {
    expect(semanticEqual(undefined, [])).toBe(true);
    expect(semanticEqual(null, {})).toBe(true);
    expect(semanticEqual({ a: undefined }, {})).toBe(true);
    expect(semanticEqual(['a', 'b'], ['b', 'a'])).toBe(false);
    expect(semanticEqual({ a: { b: [1] } }, { a: { b: [1] } })).toBe(true);
    expect(semanticEqual({ a: 1 }, { a: '1' })).toBe(false);
  });
});

// ---- nodes ----

describe('node eligibility', () => {
  test('strconv.ParseBool spellings', () => {
    for (const t of ['1', 't', 'T', 'true', 'TRUE', 'True']) expect(parseGoBool(t)).toBe(true);
    for (const f of ['0', 'f', 'F', 'false', 'FALSE', 'False']) expect(parseGoBool(f)).toBe(false);
    for (const x of ['', 'yes', 'no', 'tRUE', ' false', 'foo']) expect(parseGoBool(x)).toBeUndefined();
  });

  test('exclusion label: absent or false includes, anything else excludes', () => {
    expect(nodeIncludedInLoadBalancers(makeNode())).toBe(true);
    expect(nodeIncludedInLoadBalancers(makeNode((n) => delete n.metadata!.labels))).toBe(true);
    for (const v of ['false', 'False', 'FALSE', '0', 'f', 'F']) expect(nodeIncludedInLoadBalancers(makeNode(labelled(EXCLUDE_FROM_LB_LABEL, v)))).toBe(true);
    for (const v of ['', 'true', 'foo', 'yes', '1']) expect(nodeIncludedInLoadBalancers(makeNode(labelled(EXCLUDE_FROM_LB_LABEL, v)))).toBe(false);
  });

  // Upstream Test_respectsPredicates, with readiness no longer a criterion.
  const cases: [string, V1Node, boolean][] = [
    ['plain node', makeNode(), true],
    ['empty node', {}, true],
    ['not ready', makeNode(ready(false)), true],
    ['no ready condition', makeNode(readyUnset), true],
    ['empty labels', makeNode(), true],
    ['excluded with ""', makeNode(excluded), false],
    ['excluded false', makeNode(labelled(EXCLUDE_FROM_LB_LABEL, 'false')), true],
    ['excluded true', makeNode(labelled(EXCLUDE_FROM_LB_LABEL, 'true')), false],
    ['excluded foo', makeNode(labelled(EXCLUDE_FROM_LB_LABEL, 'foo')), false],
    ['autoscaler taint', makeNode(tainted(TO_BE_DELETED_TAINT)), false],
    ['other taint', makeNode(tainted('other')), true],
    ['being deleted', makeNode(deleted), false],
  ];
  for (const [name, node, want] of cases) test(name, () => expect(nodeEligibleForLoadBalancer(node)).toBe(want));
});

describe('shouldSyncUpdatedNode', () => {
  // Upstream Test_shouldSyncUpdatedNode_individualPredicates.
  const individual: [string, V1Node, V1Node, boolean][] = [
    ['nothing changed', makeNode(), makeNode(), false],
    ['excluded F->T', makeNode(), makeNode(excluded), true],
    ['excluded T->F', makeNode(excluded), makeNode(), true],
    ['excluded T->T', makeNode(excluded), makeNode(excluded), false],
    ['excluded "" -> "true" stays excluded', makeNode(excluded), makeNode(labelled(EXCLUDE_FROM_LB_LABEL, 'true')), false],
    ['excluded label "false" added', makeNode(), makeNode(labelled(EXCLUDE_FROM_LB_LABEL, 'false')), false],
    ['other taint F->T', makeNode(), makeNode(tainted('other')), false],
    ['other taint T->F', makeNode(tainted('other')), makeNode(), false],
    ['other label F->T', makeNode(), makeNode(labelled('other', '')), false],
    ['other label T->F', makeNode(labelled('other', '')), makeNode(), false],
    ['readiness F->F', makeNode(ready(false)), makeNode(ready(false)), false],
    ['readiness T->F', makeNode(), makeNode(ready(false)), false],
    ['readiness F->T', makeNode(ready(false)), makeNode(), false],
    ['readiness F->unset', makeNode(ready(false)), makeNode(readyUnset), false],
    ['readiness unset->F', makeNode(readyUnset), makeNode(ready(false)), false],
    ['readiness unset->unset', makeNode(readyUnset), makeNode(readyUnset), false],
    ['ready F, other condition F->T', makeNode(ready(false), condition('DiskPressure', 'False')), makeNode(ready(false), condition('DiskPressure', 'True')), false],
    ['ready F, other condition T->F', makeNode(ready(false), condition('DiskPressure', 'True')), makeNode(ready(false), condition('DiskPressure', 'False')), false],
    ['ready T, other condition F->T', makeNode(condition('Other', 'False')), makeNode(condition('Other', 'True')), false],
    ['ready T, other condition T->F', makeNode(condition('Other', 'True')), makeNode(condition('Other', 'False')), false],
    ['deletionTimestamp F->T', makeNode(), makeNode(deleted), false],
    ['providerID set F->T', makeNode(providerID('')), makeNode(), true],
    ['providerID set T->F', makeNode(), makeNode(providerID('')), true],
    ['providerID change', makeNode(), makeNode(providerID(`${PROVIDER_ID}-2`)), true],
  ];
  for (const [name, oldNode, newNode, want] of individual) test(name, () => expect(shouldSyncUpdatedNode(oldNode, newNode)).toBe(want));

  // Upstream Test_shouldSyncUpdatedNode_compoundedPredicates.
  const taint = tainted(TO_BE_DELETED_TAINT);
  const compound: [string, V1Node, V1Node, boolean][] = [
    ['tainted T, excluded F->T', makeNode(taint), makeNode(taint, excluded), true],
    ['tainted T, excluded T->F', makeNode(taint, excluded), makeNode(taint), true],
    ['tainted T, providerID set F->T', makeNode(taint, providerID('')), makeNode(taint), true],
    ['tainted T, providerID set T->F', makeNode(taint), makeNode(taint, providerID('')), true],
    ['tainted T, providerID change', makeNode(taint), makeNode(taint, providerID(`${PROVIDER_ID}-2`)), true],
    ['tainted T, ready F->T', makeNode(taint, ready(false)), makeNode(taint), false],
    ['tainted T, ready T->F', makeNode(taint), makeNode(taint, ready(false)), false],
    ['excluded T, tainted F->T', makeNode(excluded), makeNode(excluded, taint), false],
    ['excluded T, tainted T->F', makeNode(excluded, taint), makeNode(excluded), false],
    ['excluded T, ready F->T', makeNode(excluded, ready(false)), makeNode(excluded), false],
    ['excluded T, ready T->F', makeNode(excluded), makeNode(excluded, ready(false)), false],
    ['excluded T, providerID set F->T', makeNode(excluded, providerID('')), makeNode(excluded), true],
    ['excluded T, providerID set T->F', makeNode(excluded), makeNode(excluded, providerID('')), true],
    ['excluded T, providerID change', makeNode(excluded), makeNode(excluded, providerID(`${PROVIDER_ID}-2`)), true],
    ['ready F, tainted F->T', makeNode(ready(false)), makeNode(ready(false), taint), false],
    ['ready F, tainted T->F', makeNode(ready(false), taint), makeNode(ready(false)), false],
    ['ready F, excluded F->T', makeNode(ready(false)), makeNode(ready(false), excluded), true],
    ['ready F, excluded T->F', makeNode(ready(false), excluded), makeNode(ready(false)), true],
    ['ready F, providerID set F->T', makeNode(ready(false), providerID('')), makeNode(ready(false)), true],
    ['ready F, providerID set T->F', makeNode(ready(false)), makeNode(ready(false), providerID('')), true],
    ['ready F, providerID change', makeNode(ready(false)), makeNode(ready(false), providerID(`${PROVIDER_ID}-2`)), true],
    ['providerID unset, excluded F->T', makeNode(providerID('')), makeNode(providerID(''), excluded), true],
    ['providerID unset, excluded T->F', makeNode(providerID(''), excluded), makeNode(providerID('')), true],
    ['providerID unset, ready T->F', makeNode(providerID('')), makeNode(providerID(''), ready(false)), false],
    ['providerID unset, ready F->T', makeNode(providerID(''), ready(false)), makeNode(providerID('')), false],
    ['providerID unset, tainted T->F', makeNode(providerID(''), taint), makeNode(providerID('')), false],
    ['providerID unset, tainted F->T', makeNode(providerID('')), makeNode(providerID(''), taint), false],
  ];
  for (const [name, oldNode, newNode, want] of compound) test(name, () => expect(shouldSyncUpdatedNode(oldNode, newNode)).toBe(want));
});

describe('nodesSufficientlyEqual', () => {
  const n1 = makeNode(named('node1'));
  const n2 = makeNode(named('node2'));
  const n3 = makeNode(named('node3'));
  test('same names and providerIDs in any order', () => {
    expect(nodesSufficientlyEqual([n1, n2], [n2, n1])).toBe(true);
    expect(nodesSufficientlyEqual([], [])).toBe(true);
  });
  test('a different node, count or providerID differs', () => {
    expect(nodesSufficientlyEqual([n1, n2], [n1, n3])).toBe(false);
    expect(nodesSufficientlyEqual([n1, n2], [n1])).toBe(false);
    expect(nodesSufficientlyEqual([n1, n2], [makeNode(named('node1'), providerID('cumulus/1')), n2])).toBe(false);
  });
  test('other fields do not matter', () => {
    expect(nodesSufficientlyEqual([n1], [makeNode(named('node1'), ready(false), tainted('x'))])).toBe(true);
  });
});

describe('event texts', () => {
  const nodes = (count: number) => Array.from({ length: count }, (_, i) => makeNode(named(`node-${String(i).padStart(2, '0')}`)));
  test('up to 20 names, sorted', () => {
    expect(loggableNodeNames([makeNode(named('b')), makeNode(named('a'))])).toEqual(['a', 'b']);
    expect(loggableNodeNames(nodes(20))).toHaveLength(20);
  });
  test('the first 20 names, then how many more', () => {
    const names = loggableNodeNames(nodes(25));
    expect(names).toHaveLength(21);
    expect(names[19]).toBe('node-19');
    expect(names[20]).toBe('<5 more>');
  });
  test('UpdateLoadBalancerFailed message as upstream prints it', () => {
    expect(updateFailedMessage([makeNode(named('n2')), makeNode(named('n1'))], 'boom')).toBe(
      'Error updating load balancer with new hosts [n1 n2] [node names limited, total number of nodes: 2], error: boom',
    );
  });
});

test('retryAfterSeconds finds a RetryAfterError in the cause chain', () => {
  expect(retryAfterSeconds(new RetryAfterError(42))).toBe(42);
  expect(retryAfterSeconds(new Error('outer', { cause: new Error('mid', { cause: new RetryAfterError(7) }) }))).toBe(7);
  expect(retryAfterSeconds(new Error('plain'))).toBeUndefined();
  expect(retryAfterSeconds(undefined)).toBeUndefined();
});
