import { writeFileSync } from 'node:fs';
import { replaceFile } from '../harness/files.ts';
import type { Random } from './random.ts';
import type { Group } from './world.ts';

/**
 * The fault kinds and how each is done and undone. A fault holds a resource (the leader of a
 * group, the control plane, a provider API, a config file) so that two faults never fight over
 * one thing; faults on different resources overlap freely. Provider and config faults last less
 * than the deletion grace period (20 s) and leave their resource alone for a cool-down after,
 * so a true answer is read between two lies: the guarantee under test is that no lie shorter
 * than the grace period deletes a node, and that an empty or mostly-empty answer never does.
 */

export const FAULT_KINDS = [
  'leader-sigkill', 'leader-sigterm', 'leader-sigstop',
  'apiserver-restart', 'etcd-pause',
  'redfish-down', 'redfish-slow', 'redfish-500',
  'proxmox-down', 'proxmox-hang', 'proxmox-slow', 'proxmox-500', 'proxmox-empty', 'proxmox-partial',
  'static-config-half', 'static-config-invalid', 'static-config-empty',
  'proxmox-config-half', 'proxmox-config-invalid', 'proxmox-config-empty',
  'bgp-session-reset', 'bgp-router-restart',
  'speaker-sigkill', 'speaker-sigterm', 'speaker-sigstop', 'speaker-restart', 'node-link-down',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];
export const NETWORK_FAULT_KINDS: readonly FaultKind[] = [
  'bgp-session-reset', 'bgp-router-restart', 'speaker-sigkill', 'speaker-sigterm', 'speaker-sigstop', 'speaker-restart', 'node-link-down',
];

/** What a fault's recovery is measured on: a group's canary, or the network invariants holding again. */
export type RecoveryProbe = Group | 'bgp' | 'l2';

/** What the faults act on, provided by the soak. */
export interface FaultTargets {
  /** The replica slot holding a group's lease now, if known and running. */
  leader(group: Group): { name: string; signal(sig: NodeJS.Signals): boolean } | undefined;
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
  etcdPid(): number;
  redfish: { setLink(mode: 'up' | 'down' | 'hang'): void; setDelay(ms: number): void; setFailStatus(status?: number): void };
  proxmox: { setLink(mode: 'up' | 'down' | 'hang'): void; setDelay(ms: number): void; setFailStatus(status?: number): void; setVisible(v?: 'none' | 'one'): void };
  /** The config file's path and its current good text (rendered from the world). */
  config(group: Group): { path: string; text(): string };
  /** A config fault is holding the file: the soak must not write it meanwhile. */
  setConfigHeld(group: Group, held: boolean): void;
  /** The BGP router (GoBGP, peered with the static group's replicas). */
  router: {
    /** The address of the replica holding the static lease, if known. */
    leaderAddress(): string | undefined;
    /** Shuts its session with `address` down (NOTIFICATION Cease), or resets it (down and up at once). */
    session(address: string, action: 'reset' | 'disable' | 'enable'): Promise<void>;
    /** SIGKILL of gobgpd (sessions cut without NOTIFICATION, RIB lost). */
    kill(): Promise<void>;
    start(): Promise<void>;
  };
  /**
   * One of the L2 speakers (`edge-ccm speaker`, restarted 1-3 s after it exits; restart(): at
   * once), drawn while every one runs, so the others must take over.
   */
  speaker(rnd: Random): { name: string; readonly pid: number | undefined; signal(sig: NodeJS.Signals): boolean; restart(sig: NodeJS.Signals, afterMs: number): boolean } | undefined;
  /** One L2 speaker node's link to the switch (its port on the switch), drawn while every speaker runs. */
  speakerLink(rnd: Random): { name: string; down(): Promise<void>; up(): Promise<void> } | undefined;
}

export interface InjectedFault {
  kind: FaultKind;
  /** What must work again: a group's canary served, or the network invariants holding. */
  groups: RecoveryProbe[];
  detail: string;
  /** Resolves when the fault has been undone (at once for a kill). */
  ended: Promise<void>;
}

const sleep = (ms: number) => Bun.sleep(ms);

export function resourceOf(kind: FaultKind, group: Group): string {
  if (kind.startsWith('leader-')) return `leader:${group}`;
  if (kind === 'apiserver-restart' || kind === 'etcd-pause') return 'control-plane';
  if (kind.startsWith('redfish-')) return 'redfish';
  if (kind.startsWith('static-config')) return 'static-config';
  if (kind.startsWith('proxmox-config')) return 'proxmox-config';
  if (kind.startsWith('bgp-')) return 'router';
  if (kind.startsWith('speaker-') || kind === 'node-link-down') return 'speakers';
  return 'proxmox-api';
}

/** The group a fault kind acts on (leader faults: either, drawn). */
export function groupOf(kind: FaultKind, rnd: Random): Group {
  if (kind.startsWith('leader-')) return rnd.pick(['static', 'proxmox'] as const);
  if (kind.startsWith('redfish-') || kind.startsWith('static-') || kind.startsWith('bgp-') || kind.startsWith('speaker-') || kind === 'node-link-down') return 'static';
  return 'proxmox';
}

/**
 * Resolves once a speaker ended by a fault runs again (a new pid), so the fault holds the
 * speakers until then and the next speaker fault finds all three running.
 */
async function runningAgain(speaker: { readonly pid: number | undefined }, old: number | undefined, downMs: number): Promise<void> {
  await sleep(downMs);
  const deadline = Date.now() + 60_000;
  while (speaker.pid === undefined || speaker.pid === old) {
    if (Date.now() > deadline) throw new Error('the speaker did not run again within 60 s');
    await sleep(100);
  }
}

/** Injects one fault; undefined when it cannot be done now (no leader to hit). */
export function inject(kind: FaultKind, group: Group, t: FaultTargets, rnd: Random, leaseDurationMs: number): InjectedFault | undefined {
  const both: Group[] = ['static', 'proxmox'];
  const lasting = (groups: RecoveryProbe[], detail: string, undo: () => Promise<void>): InjectedFault => ({ kind, groups, detail, ended: undo() });
  switch (kind) {
    case 'leader-sigkill':
    case 'leader-sigterm': {
      const leader = t.leader(group);
      const sig = kind === 'leader-sigkill' ? 'SIGKILL' : 'SIGTERM';
      if (!leader || !leader.signal(sig)) return undefined;
      return { kind, groups: [group], detail: `${sig} ${leader.name}`, ended: Promise.resolve() };
    }
    case 'leader-sigstop': {
      const leader = t.leader(group);
      if (!leader || !leader.signal('SIGSTOP')) return undefined;
      const ms = leaseDurationMs + rnd.int(2_000, 8_000);
      return lasting([group], `SIGSTOP ${leader.name} for ${ms} ms (lease ${leaseDurationMs} ms)`, async () => {
        await sleep(ms);
        leader.signal('SIGCONT');
      });
    }
    case 'apiserver-restart': {
      const down = rnd.int(0, 5_000);
      return lasting(both, `kube-apiserver SIGKILL, restarted after ${down} ms`, async () => {
        await t.stopApiServer();
        await sleep(down);
        await t.startApiServer();
      });
    }
    case 'etcd-pause': {
      const ms = rnd.int(3_000, 15_000);
      const pid = t.etcdPid();
      process.kill(pid, 'SIGSTOP');
      return lasting(both, `etcd SIGSTOP for ${ms} ms`, async () => {
        await sleep(ms);
        process.kill(pid, 'SIGCONT');
      });
    }
    case 'redfish-down':
    case 'redfish-slow':
    case 'redfish-500': {
      const ms = rnd.int(8_000, 25_000);
      if (kind === 'redfish-down') t.redfish.setLink(rnd.chance(0.5) ? 'down' : 'hang');
      if (kind === 'redfish-slow') t.redfish.setDelay(3_000);
      if (kind === 'redfish-500') t.redfish.setFailStatus(500);
      return lasting(['static'], `${kind} for ${ms} ms`, async () => {
        await sleep(ms);
        t.redfish.setLink('up');
        t.redfish.setDelay(0);
        t.redfish.setFailStatus(undefined);
      });
    }
    case 'proxmox-down':
    case 'proxmox-hang':
    case 'proxmox-slow':
    case 'proxmox-500':
    case 'proxmox-empty':
    case 'proxmox-partial': {
      const ms = rnd.int(5_000, 15_000);
      let detail: string = kind;
      if (kind === 'proxmox-down') t.proxmox.setLink('down');
      if (kind === 'proxmox-hang') t.proxmox.setLink('hang');
      if (kind === 'proxmox-slow') t.proxmox.setDelay(3_000);
      if (kind === 'proxmox-500') {
        const status = rnd.pick([500, 503, 596]);
        t.proxmox.setFailStatus(status);
        detail = `proxmox answers ${status}`;
      }
      if (kind === 'proxmox-empty') t.proxmox.setVisible('none');
      if (kind === 'proxmox-partial') t.proxmox.setVisible('one');
      return lasting(['proxmox'], `${detail} for ${ms} ms`, async () => {
        await sleep(ms);
        t.proxmox.setLink('up');
        t.proxmox.setDelay(0);
        t.proxmox.setFailStatus(undefined);
        t.proxmox.setVisible(undefined);
      });
    }
    case 'bgp-session-reset': {
      const leader = t.router.leaderAddress();
      if (!leader) return undefined;
      // Half the time a reset (down and up at once), else the neighbour shut down for a while.
      if (rnd.chance(0.5)) {
        return lasting(['bgp'], `router resets its session with ${leader}`, () => t.router.session(leader, 'reset'));
      }
      const ms = rnd.int(2_000, 10_000);
      return lasting(['bgp'], `router shuts its session with ${leader} down for ${ms} ms`, async () => {
        await t.router.session(leader, 'disable');
        await sleep(ms);
        await t.router.session(leader, 'enable');
      });
    }
    case 'bgp-router-restart': {
      const down = rnd.int(0, 5_000);
      return lasting(['bgp'], `gobgpd SIGKILL, started again after ${down} ms`, async () => {
        await t.router.kill();
        await sleep(down);
        await t.router.start();
      });
    }
    case 'speaker-sigkill':
    case 'speaker-sigterm': {
      // The speaker alone, its node, link and kernel up (a crash, an OOM kill, a DaemonSet's rolling update).
      // Down 1-12 s: a quick restart, or longer than the liveness timeout (3 s), as a kubelet's
      // crash back-off (10 s) keeps it, so the survivors must agree among themselves meanwhile.
      const speaker = t.speaker(rnd);
      const sig = kind === 'speaker-sigkill' ? 'SIGKILL' : 'SIGTERM';
      const downMs = rnd.int(1_000, 12_000);
      const pid = speaker?.pid;
      if (!speaker || !speaker.restart(sig, downMs)) return undefined;
      return { kind, groups: ['l2'], detail: `${sig} ${speaker.name}, started again ${downMs} ms after it exits`, ended: runningAgain(speaker, pid, downMs) };
    }
    case 'speaker-restart': {
      // SIGTERM and started again at once: the returning speaker must not leave an address unanswered.
      const speaker = t.speaker(rnd);
      const pid = speaker?.pid;
      if (!speaker || !speaker.restart('SIGTERM', 0)) return undefined;
      return { kind, groups: ['l2'], detail: `${speaker.name} restarted (SIGTERM, started again as soon as it exited)`, ended: runningAgain(speaker, pid, 0) };
    }
    case 'node-link-down': {
      // The node's cable pulled (its switch port down): its speaker runs on, heard by nobody.
      const link = t.speakerLink(rnd);
      if (!link) return undefined;
      const ms = rnd.int(2_000, 10_000);
      return lasting(['l2'], `${link.name} link down for ${ms} ms`, async () => {
        await link.down();
        await sleep(ms);
        await link.up();
      });
    }
    case 'speaker-sigstop': {
      const speaker = t.speaker(rnd);
      if (!speaker || !speaker.signal('SIGSTOP')) return undefined;
      const ms = rnd.int(2_000, 10_000);
      return lasting(['l2'], `SIGSTOP ${speaker.name} for ${ms} ms`, async () => {
        await sleep(ms);
        speaker.signal('SIGCONT');
      });
    }
    case 'static-config-half':
    case 'static-config-invalid':
    case 'static-config-empty':
    case 'proxmox-config-half':
    case 'proxmox-config-invalid':
    case 'proxmox-config-empty': {
      const ms = rnd.int(5_000, 15_000);
      const { path, text } = t.config(group);
      const good = text();
      let detail: string;
      t.setConfigHeld(group, true);
      if (kind.endsWith('-half')) {
        // A writer that stopped midway: the file truncated in place (no rename), cut early
        // enough that most machines are lost (the static file lists them last).
        const machinesAt = Math.max(0, good.indexOf('machines:'));
        const from = group === 'static' ? machinesAt : 0;
        const cut = from + rnd.int(0, Math.floor((good.length - from) * 0.3));
        writeFileSync(path, good.slice(0, cut));
        detail = `${group} config cut at byte ${cut} of ${good.length}`;
      } else if (kind.endsWith('-invalid')) {
        const bad = rnd.pick([
          `${good}\nunexpectedKey: true\n`,
          good.replace(/^(\s*)(allowInsecureHTTP|authoritative): true$/m, '$1$2: "yes"'),
          `${good.slice(0, Math.floor(good.length / 2))}\n  - [unclosed\n`,
        ]);
        replaceFile(path, bad === good ? `${good}\nunexpectedKey: true\n` : bad);
        detail = `${group} config made invalid`;
      } else {
        replaceFile(path, '');
        detail = `${group} config emptied`;
      }
      return lasting([group], `${detail} for ${ms} ms`, async () => {
        await sleep(ms);
        // The half-written file is finished in place; the others are fixed as an editor saves.
        if (kind.endsWith('-half')) writeFileSync(path, text());
        else replaceFile(path, text());
        t.setConfigHeld(group, false);
      });
    }
  }
}
