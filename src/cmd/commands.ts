/**
 * The subcommands beside the controller manager, for --help, the unknown-command error and each
 * command's own --help. A test checks this list against the commands src/cmd/cli.ts dispatches.
 */
export interface CommandInfo {
  name: string;
  summary: string;
  /** Printed by `edge-ccm NAME --help` for the commands that have no flag parser of their own. */
  usage?: string;
}

export const COMMANDS: readonly CommandInfo[] = [
  {
    name: 'validate',
    summary: 'check a --cloud-config file for a provider, without a cluster',
    usage:
      'Usage:\n  edge-ccm validate --cloud-provider NAME --cloud-config FILE\n\n' +
      'Checks the provider configuration FILE as the controller manager would read it and prints every problem\n' +
      'with its path and line. Exit 0 when valid, 2 when invalid (the code the controller manager exits with on\n' +
      'the same file).\n\n' +
      'Several providers (beyond upstream, see docs/hybrid-clusters.md):\n' +
      '  edge-ccm validate --cloud-provider static,proxmox --cloud-config static=FILE,proxmox=FILE\n' +
      'checks each file with its provider\'s checks.',
  },
  {
    name: 'selftest',
    summary: 'exercise the Kubernetes client against a real API server',
    usage:
      'Usage:\n  edge-ccm selftest --kubeconfig FILE\n\n' +
      'Exercises the client against the API server FILE names: list, create, get, every patch type, conflict,\n' +
      'watch and delete, one line per check. Exit 0 when every check passes, 1 on the first failure, 2 when FILE\n' +
      'is missing.',
  },
  { name: 'speaker', summary: 'the per-node announcer: ARP/NDP for the load-balancer addresses this node is elected for, BGP+BFD with announceFrom: nodes (see edge-ccm speaker --help)' },
  { name: 'vip', summary: 'the control-plane VIP: holds controlPlaneEndpoint on the control-plane host whose API server answers (see edge-ccm vip --help)' },
  { name: 'import', summary: 'convert a MetalLB, kube-vip or Cilium configuration (see edge-ccm import --help)' },
];

export const commandNames = (): string => COMMANDS.map((c) => c.name).join(', ');
