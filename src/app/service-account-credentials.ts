import { KubeConfig } from './kubeconfig.ts';
import { isNotFound } from '../kube/errors.ts';
import { BunKubeTransport, type KubeTransport, type TransportOptions } from '../kube/transport.ts';
import type { Logger } from '../log.ts';
import { Backoff, type BackoffBounds } from '../util/backoff.ts';
import { sleep } from '../util/time.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * --use-service-account-credentials, as upstream's SAControllerClientBuilder: each controller
 * talks to the API as its own service account in kube-system (node-controller,
 * service-controller, route-controller), whose permissions the API server bootstraps
 * (system:controller:*). The account is created if missing and its token comes from the
 * TokenRequest API, renewed at 80% of the lifetime the API server granted; a failed renewal is
 * retried with backoff (5s doubling to 1 min) until it succeeds, never left to the next period
 * (the token would expire first and every controller request be refused).
 */
const NAMESPACE = 'kube-system';
const TOKEN_SECONDS = 3600;
const RENEW_AT = 0.8;
export const DEFAULT_RENEW_RETRY = { initialMs: 5_000, maxMs: 60_000 };

interface IssuedToken {
  token: string;
  /** When to ask for the next one: RENEW_AT of the granted lifetime. */
  renewInMs: number;
}

interface TokenRequestStatus {
  status?: { token?: string; expirationTimestamp?: string };
}

export class ServiceAccountCredentials {
  private readonly transports = new Map<string, Promise<KubeTransport>>();

  constructor(
    private readonly base: KubeConfig,
    private readonly root: KubeTransport,
    private readonly options: TransportOptions,
    private readonly logger: Logger,
    private readonly signal: AbortSignal,
    private readonly retry: BackoffBounds = DEFAULT_RENEW_RETRY,
  ) {}

  /** The transport acting as kube-system/NAME; one per name. */
  transportFor(name: string): Promise<KubeTransport> {
    let t = this.transports.get(name);
    if (!t) {
      t = this.create(name);
      this.transports.set(name, t);
    }
    return t;
  }

  private async create(name: string): Promise<KubeTransport> {
    await this.ensureServiceAccount(name);
    const issued = await this.requestToken(name);
    const user = { name: `sa-${name}`, token: issued.token };
    const cluster = this.base.getCurrentCluster()!;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [cluster],
      users: [user],
      contexts: [{ name: 'sa', cluster: cluster.name, user: user.name }],
      currentContext: 'sa',
    });
    void this.renew(name, kc, issued.renewInMs);
    // Re-read the (renewed) token every 30s; a 401 re-reads at once.
    return new BunKubeTransport(kc, { ...this.options, credentialRefreshMs: 30_000 });
  }

  private async renew(name: string, kc: KubeConfig, firstInMs: number): Promise<void> {
    let waitMs = firstInMs;
    const backoff = Backoff.doubling(this.retry);
    while (!this.signal.aborted) {
      await sleep(waitMs, this.signal).catch(() => {});
      if (this.signal.aborted) return;
      try {
        const issued = await this.requestToken(name);
        // client-node's users are plain objects: the transport picks the new token up on its next refresh.
        (kc.getCurrentUser() as { token?: string }).token = issued.token;
        waitMs = issued.renewInMs;
        backoff.reset();
      } catch (e) {
        waitMs = backoff.next();
        this.logger.error('renewing service account token failed; retrying', { serviceAccount: name, retryInMs: waitMs, error: errorMessage(e) });
      }
    }
  }

  private async ensureServiceAccount(name: string): Promise<void> {
    const path = `/api/v1/namespaces/${NAMESPACE}/serviceaccounts`;
    try {
      await this.root.request({ method: 'GET', path: `${path}/${name}` });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      await this.root.request({ method: 'POST', path, query: { fieldManager: 'edge-ccm' }, body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: NAMESPACE } } })
        .catch((err) => {
          if ((err as { status?: number }).status !== 409) throw err;
        });
    }
  }

  private async requestToken(name: string): Promise<IssuedToken> {
    const asked = Date.now();
    const res = await this.root.request<TokenRequestStatus>({
      method: 'POST',
      path: `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/${name}/token`,
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: TOKEN_SECONDS } },
    });
    const token = res.status?.token;
    if (!token) throw new Error(`TokenRequest for ${NAMESPACE}/${name} returned no token`);
    // The server may grant another lifetime than asked (--service-account-max-token-expiration).
    const expires = Date.parse(res.status?.expirationTimestamp ?? '');
    const lifetimeMs = Number.isFinite(expires) && expires > asked ? expires - asked : TOKEN_SECONDS * 1000;
    return { token, renewInMs: lifetimeMs * RENEW_AT };
  }
}
