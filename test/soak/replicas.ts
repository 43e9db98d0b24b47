import { join } from 'node:path';
import { LoggedProcess } from '../harness/processes.ts';
import { TIMING } from './options.ts';
import { CLUSTER_CIDR, GROUP_LABEL, type Group } from './world.ts';

/**
 * Supervised processes, as a Deployment's or a DaemonSet's pods: started again a second or two
 * after they exit (as a kubelet would), whoever ended them. An edge-ccm replica slot (the
 * compiled binary) has its own client certificate user (`soak-GROUP-N`), so the audit log tells
 * the replicas apart; the static group's run in the BGP lab's namespaces (test/soak/network.ts).
 */

export interface ExitRecord {
  slot: string;
  pid: number;
  code: number;
  /** The signal the soak sent it, if any. */
  signalled?: NodeJS.Signals;
  at: number;
  logTail: string;
}

/** How long after the soak repaired a config file a start that read the broken one may still exit. */
export const CONFIG_REPAIR_GRACE_MS = 5_000;

/**
 * An exit that is the product refusing a broken config file at start (exit 2, "invalid ...
 * configuration", docs/flags.md's exit codes) while a fault of the soak holds that file broken, or
 * just after it was repaired: a replica or speaker restarted meanwhile (after a leader or speaker
 * fault) must refuse to start, as upstream does; the next start, with the file repaired, runs.
 */
export function refusedBrokenConfig(e: Pick<ExitRecord, 'code' | 'at' | 'logTail'>, held: boolean, heldEndedAt: number): boolean {
  return e.code === 2 && (held || e.at - heldEndedAt < CONFIG_REPAIR_GRACE_MS) && /invalid .*configuration/.test(e.logTail);
}

export interface ReplicaConfig {
  binary: string;
  group: Group;
  index: number;
  kubeconfig: string;
  cloudConfig: string;
  dir: string;
  /** Runs it inside a network namespace: `ip netns exec NS` (which execs: the pid is edge-ccm's). */
  wrap?: string[];
  /** Its address on the BGP lab's LAN (the router's neighbour), when it runs there. */
  address?: string;
}

export const userOf = (group: Group, index: number) => `soak-${group}-${index}`;
export const leaseName = (group: Group) => `soak-${group}`;

export function replicaArgs(c: ReplicaConfig): string[] {
  const ms = (n: number) => `${n}ms`;
  return [
    `--cloud-provider=${c.group}`,
    `--cloud-config=${c.cloudConfig}`,
    `--kubeconfig=${c.kubeconfig}`,
    '--secure-port=0',
    `--leader-elect-resource-name=${leaseName(c.group)}`,
    `--leader-elect-lease-duration=${ms(TIMING.leaseDurationMs)}`,
    `--leader-elect-renew-deadline=${ms(TIMING.renewDeadlineMs)}`,
    `--leader-elect-retry-period=${ms(TIMING.retryPeriodMs)}`,
    `--node-monitor-period=${ms(TIMING.nodeMonitorPeriodMs)}`,
    `--node-deletion-grace-period=${ms(TIMING.graceMs)}`,
    `--node-deletion-not-found-threshold=${TIMING.notFoundThreshold}`,
    `--node-deletion-breaker-window=${ms(TIMING.breakerWindowMs)}`,
    `--managed-node-selector=${GROUP_LABEL}=${c.group}`,
    `--managed-node-provider-id-prefixes=${c.group}://`,
    '--node-status-update-frequency=30s',
    '--shutdown-grace-period=10s',
    // Services are the static group's: both providers would serve class-less services. Its
    // file has a bgp section: the route controller announces the nodes' pod CIDRs.
    ...(c.group === 'proxmox' ? ['--controllers=cloud-node,cloud-node-lifecycle'] : [`--cluster-cidr=${CLUSTER_CIDR}`, `--route-reconciliation-period=${ms(TIMING.routeReconciliationMs)}`]),
  ];
}

/** A supervised process: `cmd` run again after each exit, until stop(). */
export class ProcessSlot {
  proc?: LoggedProcess;
  paused = false;
  starts = 0;
  /**
   * Since when (Date.now()) it has not been serving: SIGKILL, SIGTERM or SIGSTOP sent, or an exit
   * nobody asked for; undefined while it runs. The BGP dead-next-hop check counts from here.
   */
  downSince?: number;
  private signalled?: NodeJS.Signals;
  private supervising = true;
  private restartTimer?: ReturnType<typeof setTimeout>;
  /** The delay before the next start only (restart()), instead of restartDelayMs(). */
  private nextDelayMs?: number;

  constructor(
    readonly name: string,
    private readonly cmd: string[],
    private readonly dir: string,
    private readonly onExit: (e: ExitRecord) => void,
    private readonly restartDelayMs: () => number,
  ) {}

  get pid(): number | undefined {
    return this.proc?.running ? this.proc.pid : undefined;
  }

  start(): void {
    this.starts++;
    this.signalled = undefined;
    this.paused = false;
    this.downSince = undefined;
    const proc = LoggedProcess.spawn(this.name, this.cmd, this.dir);
    this.proc = proc;
    void proc.exited.then((code) => {
      this.paused = false;
      this.downSince ??= Date.now();
      this.onExit({ slot: this.name, pid: proc.pid, code, signalled: this.signalled, at: Date.now(), logTail: proc.logTail(30) });
      if (!this.supervising) return;
      const delay = this.nextDelayMs ?? this.restartDelayMs();
      this.nextDelayMs = undefined;
      this.restartTimer = setTimeout(() => {
        if (this.supervising) this.start();
      }, delay);
    });
  }

  /**
   * Ends it with `sig` and starts it again `afterMs` after it exited (this once): 0 is a restart
   * as `kubectl rollout restart` or `systemctl restart` does; longer, a crash followed by a
   * kubelet's back-off.
   */
  restart(sig: NodeJS.Signals = 'SIGTERM', afterMs = 0): boolean {
    if (this.pid === undefined) return false;
    this.nextDelayMs = afterMs;
    return this.signal(sig);
  }

  /** Sends a signal by pid (only while the process runs: a pid is never reused by us). */
  signal(sig: NodeJS.Signals): boolean {
    const pid = this.pid;
    if (pid === undefined) return false;
    if (sig === 'SIGKILL' || sig === 'SIGTERM') this.signalled = sig;
    if (sig === 'SIGKILL' || sig === 'SIGTERM' || sig === 'SIGSTOP') this.downSince ??= Date.now();
    process.kill(pid, sig);
    if (sig === 'SIGSTOP') this.paused = true;
    if (sig === 'SIGCONT') {
      this.paused = false;
      this.downSince = undefined;
    }
    return true;
  }

  logPath(): string {
    return join(this.dir, `${this.name}.log`);
  }

  /** Ends the slot for good: no restart; SIGCONT first so a paused process can die. */
  async stop(): Promise<void> {
    this.supervising = false;
    clearTimeout(this.restartTimer);
    this.signalled = 'SIGKILL';
    if (this.proc?.running && this.paused) this.signal('SIGCONT');
    await this.proc?.kill();
  }
}

export class ReplicaSlot extends ProcessSlot {
  readonly user: string;

  constructor(
    readonly config: ReplicaConfig,
    onExit: (e: ExitRecord) => void,
    restartDelayMs: () => number,
  ) {
    const user = userOf(config.group, config.index);
    super(user, [...(config.wrap ?? []), config.binary, ...replicaArgs(config)], config.dir, onExit, restartDelayMs);
    this.user = user;
  }

  get group(): Group {
    return this.config.group;
  }
}
