import { Hono } from 'hono';
import type { Registry } from 'prom-client';
import type { Logger } from '../log.ts';
import { delegatedAuth, type DelegatedAuthOptions } from './auth/middleware.ts';
import type { Authenticator, Authorizer, ServerEnv } from './types.ts';
import { clientCertificateAuth, type ClientCertificateAuthenticator } from './auth/client-certificates.ts';
import { HEALTH_ENDPOINTS, renderAggregate, renderSingle, type HealthChecks, type HealthEndpoint, type HealthResponse } from './health.ts';
import { alwaysAllowMatcher, DEFAULT_ALWAYS_ALLOW_PATHS } from './auth/path-matcher.ts';
import { errorMessage } from '../util/errors.ts';

export interface ServerAppOptions {
  /** --authorization-always-allow-paths; default /healthz, /readyz, /livez. */
  alwaysAllowPaths?: readonly string[];
  authenticator?: Authenticator;
  authorizer?: Authorizer;
  /** --client-ca-file / --requestheader-*: who a client certificate (and a front proxy's headers) names. */
  clientCertificates?: ClientCertificateAuthenticator;
  /** Where a request came from (the runtime's peer address); see DelegatedAuthOptions. */
  clientAddress?: DelegatedAuthOptions['clientAddress'];
  registry: Registry;
  checks: HealthChecks;
  logger: Logger;
}

/** The routes (health, readiness, liveness, metrics) behind delegated auth; no runtime specifics. */
export function createServerApp(opts: ServerAppOptions): Hono<ServerEnv> {
  const log = opts.logger;
  const app = new Hono<ServerEnv>();

  app.use(clientCertificateAuth(opts.clientCertificates, log));
  app.use(delegatedAuth({
    isAlwaysAllowed: alwaysAllowMatcher(opts.alwaysAllowPaths ?? DEFAULT_ALWAYS_ALLOW_PATHS),
    authenticator: opts.authenticator,
    authorizer: opts.authorizer,
    clientAddress: opts.clientAddress,
    logger: log,
  }));

  for (const endpoint of HEALTH_ENDPOINTS) {
    app.get(`/${endpoint}`, async (c) => {
      const exclude = new Set(c.req.queries('exclude') ?? []);
      const results = await opts.checks.run(endpoint, exclude);
      const unknownExcludes = [...exclude].filter((n) => !results.some((r) => r.name === n));
      logFailures(log, endpoint, results);
      return plainText(renderAggregate(endpoint, results, c.req.query('verbose') !== undefined, unknownExcludes));
    });
    app.get(`/${endpoint}/:name`, async (c) => {
      const result = await opts.checks.runOne(endpoint, c.req.param('name'));
      if (!result) return c.notFound();
      logFailures(log, endpoint, [result]);
      return plainText(renderSingle(result, c.get('user') !== undefined));
    });
  }

  app.get('/metrics', async (c) => {
    const text = await opts.registry.metrics();
    return c.body(text, 200, { 'content-type': opts.registry.contentType });
  });

  app.onError((e, c) => {
    log.error('serving request failed', { path: c.req.path, error: errorMessage(e) });
    return c.text('internal server error\n', 500);
  });
  return app;
}

function plainText({ status, body }: HealthResponse): Response {
  return new Response(body, {
    status,
    headers: { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' },
  });
}

/** Failing checks' reasons go to the log (never to an unauthenticated caller). */
function logFailures(log: Logger, endpoint: HealthEndpoint, results: { name: string; error?: string }[]): void {
  for (const r of results) if (r.error !== undefined) log.debug(2, 'health check failed', { endpoint, check: r.name, error: r.error });
}
