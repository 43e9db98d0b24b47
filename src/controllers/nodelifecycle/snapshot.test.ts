import { describe, expect, test } from 'bun:test';
import type { V1Node } from '@kubernetes/client-node';
import type { Existence } from '../../cloud/types.ts';
import { ProviderSnapshots, providerIDScheme, type SnapshotOptions } from './snapshot.ts';

// The lifecycle controller's view of a provider snapshot: an empty answer is never evidence of
// absence, a shrunken one only once confirmed.

const MINUTE = 60_000;
const OPTS: SnapshotOptions = { shrinkMaxShare: 0.5, gracePeriodMs: 5 * MINUTE, confirmReads: 3 };

function node(name: string, providerID?: string): V1Node {
  return { metadata: { name, uid: `uid-${name}` }, spec: providerID ? { providerID } : {} };
}

const fleet = (n: number, scheme = 'proxmox') => Array.from({ length: n }, (_, i) => node(`w${i}`, `${scheme}://fra1/${100 + i}`));

/** Answers by node name: the named ones get `answer`, all others `rest`. */
function answers(nodes: V1Node[], rest: Existence, named: Record<string, Existence> = {}): Map<string, Existence> {
  return new Map(nodes.map((n) => [n.metadata!.name!, named[n.metadata!.name!] ?? rest]));
}

const gone = (names: string[]): Record<string, Existence> => Object.fromEntries(names.map((n) => [n, 'not-found' as const]));

describe('providerIDScheme', () => {
  test('the part before the colon; none without a providerID', () => {
    expect(providerIDScheme(node('a', 'proxmox://fra1/101'))).toBe('proxmox');
    expect(providerIDScheme(node('a', 'static://m1'))).toBe('static');
    expect(providerIDScheme(node('a', 'aws:///eu-west-1a/i-0abc'))).toBe('aws');
    expect(providerIDScheme(node('a'))).toBe('');
    expect(providerIDScheme(node('a', '://odd'))).toBe('');
  });
});

describe('an empty answer', () => {
  test('every node not found while none is found: all unknown, whatever the count of reads or time', () => {
    const nodes = fleet(10);
    const s = new ProviderSnapshots(OPTS);
    expect(s.judge(nodes, answers(nodes, 'exists'), 0).distrusted.size).toBe(0);
    for (let t = 1; t < 100; t++) {
      const j = s.judge(nodes, answers(nodes, 'not-found'), t * MINUTE);
      expect([...j.answers.values()].every((a) => a === 'unknown')).toBe(true);
      expect([...j.distrusted.values()].every((r) => r === 'empty')).toBe(true);
      expect(j.groups.get('proxmox')).toMatchObject({ state: 'empty', found: 0, notFound: 10 });
    }
  });

  test('also when the others are unknown (a cluster that could not answer) and on the very first pass', () => {
    const nodes = fleet(4);
    const j = new ProviderSnapshots(OPTS).judge(nodes, answers(nodes, 'unknown', gone(['w0'])), 0);
    expect(j.answers.get('w0')).toBe('unknown');
    expect(j.distrusted.get('w0')).toBe('empty');
  });

  test('a group is one providerID scheme: one provider\'s empty list does not hide behind another\'s nodes', () => {
    const nodes = [...fleet(3, 'proxmox'), node('s0', 'static://s0'), node('bare')];
    const j = new ProviderSnapshots(OPTS).judge(nodes, answers(nodes, 'not-found', { s0: 'exists' }), 0);
    expect(j.distrusted).toEqual(new Map([['w0', 'empty'], ['w1', 'empty'], ['w2', 'empty'], ['bare', 'empty']]));
    expect(j.groups.get('static')?.state).toBe('trusted');
    expect(j.groups.get('')?.state).toBe('empty');
  });

  test('an empty answer does not become the baseline: the machines still count as held afterwards', () => {
    const nodes = fleet(10);
    const s = new ProviderSnapshots(OPTS);
    s.judge(nodes, answers(nodes, 'exists'), 0);
    s.judge(nodes, answers(nodes, 'not-found'), MINUTE);
    // Then one machine is found again, nine are not: a shrink of 9 of 10, not a normal list.
    const j = s.judge(nodes, answers(nodes, 'not-found', { w9: 'exists' }), 2 * MINUTE);
    expect(j.groups.get('proxmox')).toMatchObject({ state: 'shrunk', heldBefore: 10, lost: 9 });
  });
});

describe('a shrunken answer', () => {
  test('losing up to the share is believed; more is unknown for the missing ones only', () => {
    const nodes = fleet(10);
    const half = new ProviderSnapshots(OPTS);
    half.judge(nodes, answers(nodes, 'exists'), 0);
    expect(half.judge(nodes, answers(nodes, 'exists', gone(['w0', 'w1', 'w2', 'w3', 'w4'])), MINUTE).distrusted.size).toBe(0);

    const more = new ProviderSnapshots(OPTS);
    more.judge(nodes, answers(nodes, 'exists'), 0);
    const j = more.judge(nodes, answers(nodes, 'exists', gone(['w0', 'w1', 'w2', 'w3', 'w4', 'w5'])), MINUTE);
    expect([...j.distrusted.keys()].sort()).toEqual(['w0', 'w1', 'w2', 'w3', 'w4', 'w5']);
    expect(j.answers.get('w0')).toBe('unknown');
    expect(j.answers.get('w6')).toBe('exists');
    expect(j.groups.get('proxmox')).toMatchObject({ state: 'shrunk', heldBefore: 10, lost: 6, reads: 1, since: MINUTE });
  });

  test('believed once read confirmReads times in a row over at least the grace period; then the new baseline', () => {
    const nodes = fleet(10);
    const s = new ProviderSnapshots(OPTS);
    s.judge(nodes, answers(nodes, 'exists'), 0);
    const shrunk = answers(nodes, 'exists', gone(['w0', 'w1', 'w2', 'w3', 'w4', 'w5']));
    expect(s.judge(nodes, shrunk, MINUTE).groups.get('proxmox')?.state).toBe('shrunk');
    expect(s.judge(nodes, shrunk, 7 * MINUTE).groups.get('proxmox')?.state).toBe('shrunk'); // time enough, 2 reads
    const third = s.judge(nodes, shrunk, 7 * MINUTE + 5_000);
    expect(third.groups.get('proxmox')?.state).toBe('confirmed');
    expect(third.answers.get('w0')).toBe('not-found');
    expect(third.distrusted.size).toBe(0);
    // The smaller list is the baseline now: the same answer is a normal one.
    expect(s.judge(nodes, shrunk, 8 * MINUTE).groups.get('proxmox')).toMatchObject({ state: 'trusted', heldBefore: 4, lost: 0 });

    // Many reads in a short time are not enough either.
    const quick = new ProviderSnapshots(OPTS);
    quick.judge(nodes, answers(nodes, 'exists'), 0);
    for (let i = 1; i <= 20; i++) expect(quick.judge(nodes, shrunk, i * 1_000).groups.get('proxmox')?.state).toBe('shrunk');
  });

  test('a pass that is not the shrunken list (grown back, empty, no answer) starts the confirmation afresh', () => {
    const nodes = fleet(10);
    const shrunk = answers(nodes, 'exists', gone(['w0', 'w1', 'w2', 'w3', 'w4', 'w5']));
    for (const between of [answers(nodes, 'exists'), answers(nodes, 'not-found'), answers(nodes, 'unknown')]) {
      const s = new ProviderSnapshots(OPTS);
      s.judge(nodes, answers(nodes, 'exists'), 0);
      s.judge(nodes, shrunk, MINUTE);
      s.judge(nodes, shrunk, 2 * MINUTE);
      s.judge(nodes, between, 3 * MINUTE);
      expect(s.judge(nodes, shrunk, 10 * MINUTE).groups.get('proxmox')).toMatchObject({ state: 'shrunk', reads: 1, since: 10 * MINUTE });
    }
  });

  test('machines the provider could not answer for stay held: answered "not found" later, they count as lost', () => {
    const nodes = fleet(10);
    const s = new ProviderSnapshots(OPTS);
    s.judge(nodes, answers(nodes, 'exists'), 0);
    const six = ['w0', 'w1', 'w2', 'w3', 'w4', 'w5'];
    s.judge(nodes, answers(nodes, 'exists', Object.fromEntries(six.map((n) => [n, 'unknown' as const]))), MINUTE);
    expect(s.judge(nodes, answers(nodes, 'exists', gone(six)), 2 * MINUTE).groups.get('proxmox')).toMatchObject({ state: 'shrunk', heldBefore: 10, lost: 6 });
  });

  test('the first pass compares with every node present: a restart in the middle of an outage believes no shrunken list', () => {
    const nodes = fleet(10);
    const j = new ProviderSnapshots(OPTS).judge(nodes, answers(nodes, 'exists', gone(['w0', 'w1', 'w2', 'w3', 'w4', 'w5'])), 0);
    expect(j.groups.get('proxmox')).toMatchObject({ state: 'shrunk', heldBefore: 10, lost: 6 });
  });

  test('machines already believed gone are not lost again; deleted nodes leave the baseline', () => {
    const nodes = fleet(4);
    const s = new ProviderSnapshots({ ...OPTS, shrinkMaxShare: 0.3 });
    s.judge(nodes, answers(nodes, 'exists'), 0);
    expect(s.judge(nodes, answers(nodes, 'exists', gone(['w0'])), MINUTE).groups.get('proxmox')).toMatchObject({ state: 'trusted', lost: 1 });
    expect(s.judge(nodes, answers(nodes, 'exists', gone(['w0'])), 2 * MINUTE).groups.get('proxmox')).toMatchObject({ state: 'trusted', heldBefore: 3, lost: 0 });
    const left = nodes.slice(1); // w0's Node object deleted
    expect(s.judge(left, answers(left, 'exists', gone(['w1'])), 3 * MINUTE).groups.get('proxmox')).toMatchObject({ state: 'shrunk', heldBefore: 3, lost: 1 });
  });

  test('a node whose machine was held leaves the baseline when its Node object is deleted', () => {
    const nodes = fleet(4);
    const s = new ProviderSnapshots(OPTS);
    expect(s.judge(nodes, answers(nodes, 'exists'), 0).groups.get('proxmox')).toMatchObject({ heldBefore: 4 });
    const left = nodes.slice(1);
    expect(s.judge(left, answers(left, 'exists'), MINUTE).groups.get('proxmox')).toMatchObject({ state: 'trusted', heldBefore: 3 });
    // Back with the same name: a new node, held again from this pass on.
    expect(s.judge(nodes, answers(nodes, 'exists'), 2 * MINUTE).groups.get('proxmox')).toMatchObject({ heldBefore: 3 });
    expect(s.judge(nodes, answers(nodes, 'exists'), 3 * MINUTE).groups.get('proxmox')).toMatchObject({ heldBefore: 4 });
  });

  test('the answers given are left as they were: distrusted ones are turned unknown in a copy', () => {
    const nodes = fleet(4);
    const given = answers(nodes, 'not-found');
    const j = new ProviderSnapshots(OPTS).judge(nodes, given, 0);
    expect([...j.answers.values()]).toEqual(['unknown', 'unknown', 'unknown', 'unknown']);
    expect([...given.values()]).toEqual(['not-found', 'not-found', 'not-found', 'not-found']);
  });

  test('share 1 never distrusts a shrunken answer; share 0 distrusts every loss until confirmed', () => {
    const nodes = fleet(10);
    const off = new ProviderSnapshots({ ...OPTS, shrinkMaxShare: 1 });
    off.judge(nodes, answers(nodes, 'exists'), 0);
    expect(off.judge(nodes, answers(nodes, 'not-found', { w9: 'exists' }), MINUTE).distrusted.size).toBe(0);
    const strict = new ProviderSnapshots({ ...OPTS, shrinkMaxShare: 0 });
    strict.judge(nodes, answers(nodes, 'exists'), 0);
    expect(strict.judge(nodes, answers(nodes, 'exists', gone(['w0'])), MINUTE).distrusted.get('w0')).toBe('shrunk');
  });
});
