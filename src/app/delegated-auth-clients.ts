import type { KubeConfig } from '@kubernetes/client-node';
import { BunKubeTransport, type TransportOptions } from '../kube/transport.ts';

/** The clients behind the serving side's TokenReviews and SubjectAccessReviews. */
export interface DelegatedAuthClients {
  tokenReviews: BunKubeTransport;
  accessReviews: BunKubeTransport;
}

/**
 * Upstream's DelegatingAuthenticationOptions and DelegatingAuthorizationOptions (k8s.io/apiserver
 * pkg/server/options) each build a client of their own with QPS 200 / burst 400, "since this will
 * effectively limit API server responsiveness": not the controllers' --kube-api-qps (20/30 let a
 * flood of random tokens queue a valid one for minutes), and never unlimited (with
 * --authentication-kubeconfig there used to be no limit: one TokenReview per request).
 */
export const DELEGATED_AUTH_RATE_LIMIT = { qps: 200, burst: 400 } as const;

/**
 * TokenReviews go to the API server of --authentication-kubeconfig, SubjectAccessReviews to that
 * of --authorization-kubeconfig (both loaded once, by the settings); either absent means ours
 * (--kubeconfig or in-cluster).
 */
export function delegatedAuthClients(
  configs: { authentication?: KubeConfig; authorization?: KubeConfig },
  ours: KubeConfig,
  base: TransportOptions,
): DelegatedAuthClients {
  const client = (config: KubeConfig | undefined, component: string) =>
    new BunKubeTransport(config ?? ours, {
      ...base,
      ...DELEGATED_AUTH_RATE_LIMIT,
      userAgent: `${base.userAgent}/${component}`,
    });
  return {
    tokenReviews: client(configs.authentication, 'delegated-authentication'),
    accessReviews: client(configs.authorization, 'delegated-authorization'),
  };
}
