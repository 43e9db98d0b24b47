import { describe, expect, test } from 'bun:test';
import type { PeerReport } from './liveness.ts';
import { decodeView, disagreeing, electionView, takeoverBlocker, viewDigest } from './view.ts';

const ready = (view = ''): PeerReport => ({ heard: true, state: 'ready', view, refused: false });
const silent: PeerReport = { heard: false, state: 'ready', view: '', refused: false };
const sorted = (s: Set<string>) => [...s].sort();
const ALL = new Set(['a', 'b', 'c']);

describe('electionView', () => {
  test('normally: itself and the ready peers heard; warming and leaving peers heard but not eligible', () => {
    const v = electionView({ self: 'a', selfReady: true, readyNodes: ALL, peers: new Map([['b', ready()], ['c', { ...ready(), state: 'warming' }]]) });
    expect(sorted(v.alive)).toEqual(['a', 'b']);
    expect(v.isolated).toBe(false);
    expect(v.digest).toBe(viewDigest(['b', 'a']));
    const leaving = electionView({ self: 'a', selfReady: true, readyNodes: ALL, peers: new Map([['b', ready()], ['c', { ...ready(), state: 'leaving' }]]) });
    expect(sorted(leaving.alive)).toEqual(['a', 'b']);
  });

  test('a speaker that hears nobody (deaf) elects by the Ready nodes, so it elects what the others elect', () => {
    const deaf = electionView({ self: 'a', selfReady: true, readyNodes: ALL, peers: new Map([['b', silent]]) });
    expect(deaf.isolated).toBe(true);
    expect(sorted(deaf.alive)).toEqual(['a', 'b', 'c']);
    // The others hear it and each other: the same view, the same digest.
    expect(deaf.digest).toBe(electionView({ self: 'b', selfReady: true, readyNodes: ALL, peers: new Map([['a', ready()], ['c', ready()]]) }).digest);
  });

  test('isolated after hearing others: the last view heard, narrowed by Ready; a node already dead then stays dead', () => {
    // c died first (a and b took its addresses), then b went silent: a keeps {a, b}, not c.
    const v = electionView({ self: 'a', selfReady: true, readyNodes: ALL, peers: new Map([['b', silent], ['c', silent]]), lastHeard: new Set(['a', 'b']) });
    expect(v.isolated).toBe(true);
    expect(sorted(v.alive)).toEqual(['a', 'b']);
    // b's Node leaves Ready (the node lifecycle's verdict): a alone.
    const later = electionView({ self: 'a', selfReady: true, readyNodes: new Set(['a', 'c']), peers: new Map([['b', silent], ['c', silent]]), lastHeard: new Set(['a', 'b']) });
    expect(sorted(later.alive)).toEqual(['a']);
  });

  test('isolated: a node whose kernel refused our heartbeats, or whose speaker said it was leaving, is gone; a node not Ready is gone', () => {
    const refused = electionView({ self: 'a', selfReady: true, readyNodes: ALL, peers: new Map([['b', { ...silent, refused: true }]]) });
    expect(sorted(refused.alive)).toEqual(['a', 'c']);
    expect(refused.isolated).toBe(true);
    // Two nodes: the other's speaker killed on a live node (refused) or stopped (leaving): this one takes everything.
    const two = new Set(['a', 'b']);
    for (const b of [{ ...silent, refused: true }, { ...ready(), state: 'leaving' as const }]) {
      const v = electionView({ self: 'a', selfReady: true, readyNodes: two, peers: new Map([['b', b]]) });
      expect(v.isolated).toBe(false);
      expect(sorted(v.alive)).toEqual(['a']);
    }
    // Alone in the cluster (the other Node not Ready): not isolated.
    expect(electionView({ self: 'a', selfReady: true, readyNodes: new Set(['a']), peers: new Map([['b', silent]]) }).isolated).toBe(false);
  });
});

describe('disagreeing', () => {
  test('ready peers heard with another digest; silent, warming and digest-less peers do not hold a takeover', () => {
    const peers = new Map<string, PeerReport>([
      ['b', ready('x')],
      ['c', ready('y')],
      ['d', { ...ready('y'), heard: false }],
      ['e', { ...ready('y'), state: 'warming' }],
      ['f', ready('')],
    ]);
    expect(disagreeing(peers, 'x')).toEqual(['c']);
    expect(disagreeing(peers, 'y')).toEqual(['b']);
  });
});

describe('decodeView', () => {
  test('ours, one less or one more: known; further off: unknown', () => {
    const alive = new Set(['a', 'b', 'c']);
    expect(sorted(decodeView(viewDigest(['c', 'b', 'a']), alive, [])!)).toEqual(['a', 'b', 'c']);
    expect(sorted(decodeView(viewDigest(['a', 'c']), alive, [])!)).toEqual(['a', 'c']);
    expect(sorted(decodeView(viewDigest(['a', 'b', 'c', 'd']), alive, ['d', 'e'])!)).toEqual(['a', 'b', 'c', 'd']);
    expect(decodeView(viewDigest(['a']), alive, ['d'])).toBeUndefined();
  });
});

describe('takeoverBlocker', () => {
  // Views by digest -> the owner of the one address "x" each elects.
  const views = new Map<string, string>();
  const ownersUnder = (digest: string) => (views.has(digest) ? new Map([['x', views.get(digest)]]) : undefined);
  const mine = 'MINE';
  views.set(mine, 'r');

  test('handback: waits for the incumbent to elect someone else, not for a third speaker that has not heard yet', () => {
    views.set('OLD', 'i');
    // The incumbent i still on the old view (electing itself): held, by i.
    expect(takeoverBlocker('x', 'r', mine, new Map([['i', ready('OLD')], ['p', ready('OLD')]]), ownersUnder)).toBe('i');
    // i moved to our view; p still on the old one, which elects i: i said it let go, so no wait.
    expect(takeoverBlocker('x', 'r', mine, new Map([['i', ready(mine)], ['p', ready('OLD')]]), ownersUnder)).toBeUndefined();
  });

  test('failover: a peer whose view still elects a holder this speaker does not hear holds it back', () => {
    views.set('WITH-A', 'a');
    expect(takeoverBlocker('x', 'r', mine, new Map([['c', ready('WITH-A')]]), ownersUnder)).toBe('c');
    expect(takeoverBlocker('x', 'r', mine, new Map([['c', ready('UNKNOWN')]]), ownersUnder)).toBe('c');
    expect(takeoverBlocker('x', 'r', mine, new Map([['c', ready(mine)]]), ownersUnder)).toBeUndefined();
  });
});
