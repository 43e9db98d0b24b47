import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpuSeconds } from './proc-sampler.ts';

/**
 * What else the machine was doing during a run: the bench shares its cores with other work, so
 * each run records the load average and the CPU the control plane spent serving it.
 */

/** The 1-minute load average. */
export function loadAverage(): number {
  return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
}

/** kube-apiserver and etcd pids of a harness control plane (its processes keep NAME.pid files in its dir). */
export function controlPlanePids(dir: string): { apiserver: number; etcd: number } {
  const pid = (name: string) => Number(readFileSync(join(dir, `${name}.pid`), 'utf8').trim());
  return { apiserver: pid('apiserver'), etcd: pid('etcd') };
}

export interface ControlPlaneCpu { apiserver: number; etcd: number }

/** CPU seconds kube-apiserver and etcd have used so far. */
export function controlPlaneCpu(dir: string): ControlPlaneCpu {
  const pids = controlPlanePids(dir);
  return { apiserver: cpuSeconds(pids.apiserver), etcd: cpuSeconds(pids.etcd) };
}

/** Samples the load average on an interval; mean and max over the run. */
export class LoadSampler {
  private readonly samples: number[] = [loadAverage()];
  private readonly timer = setInterval(() => this.samples.push(loadAverage()), 5000);

  stop(): { mean: number; max: number } {
    clearInterval(this.timer);
    this.samples.push(loadAverage());
    return { mean: this.samples.reduce((a, b) => a + b, 0) / this.samples.length, max: Math.max(...this.samples) };
  }
}
