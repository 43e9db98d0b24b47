import { ANONYMOUS_UNVERIFIED, HealthConnection, type HealthRequest } from '../../src/announce/vip/health-connection.ts';

/** Kept connections by request and URL, as ApiServerHealth keeps its one: one TLS handshake, not one per check. */
const connections = new Map<HealthRequest, Map<string, HealthConnection>>();

/** One health check of `url` as the VIP makes it: the status as text, "timeout after N ms", or the error in one line. */
export function checkStatus(url: string, timeoutMs: number, request: HealthRequest = ANONYMOUS_UNVERIFIED): Promise<string> {
  let byURL = connections.get(request);
  if (!byURL) connections.set(request, (byURL = new Map()));
  let connection = byURL.get(url);
  if (!connection) byURL.set(url, (connection = new HealthConnection(url, request)));
  return connection.check(timeoutMs);
}

/** Closes every connection checkStatus kept (a test file's afterAll). */
export function closeHealthChecks(): void {
  for (const byURL of connections.values()) for (const c of byURL.values()) c.close();
  connections.clear();
}
