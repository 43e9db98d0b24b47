import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';

const KUBEADM_ADMIN_CONF = '/etc/kubernetes/admin.conf';

/**
 * kube-vip's `manager` command line, its kubeconfig given where every version reads it: v1.0.0
 * (the version the Go module proxy serves, scripts/install-anchors.sh) ignores --k8sConfigPath in
 * its manager and reads /etc/kubernetes/admin.conf, else $HOME/.kube/config; later commits honour
 * the flag. So the kubeconfig is also linked into a home of its own, passed by env(1), which
 * execs: the pid stays kube-vip's.
 */
export function kubeVipCommand(binary: string, kubeconfig: string, args: string[]): string[] {
  if (existsSync(KUBEADM_ADMIN_CONF)) throw new Error(`${KUBEADM_ADMIN_CONF} exists on this machine: kube-vip v1.0.0 would talk to that cluster instead of the lab's`);
  const home = join(dirname(kubeconfig), 'kube-vip-home');
  const linked = join(home, '.kube/config');
  if (!existsSync(linked)) {
    mkdirSync(dirname(linked), { recursive: true });
    symlinkSync(kubeconfig, linked);
  }
  return ['/usr/bin/env', `HOME=${home}`, binary, 'manager', ...args, `--k8sConfigPath=${kubeconfig}`];
}
