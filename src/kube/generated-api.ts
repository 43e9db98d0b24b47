import {
  ResponseContext,
  SelfDecodingBody,
  ServerConfiguration,
  createConfiguration,
  wrapHttpLibrary,
  type Configuration,
  type HttpMethod,
  type PromiseHttpLibrary,
  type RequestContext,
} from '@kubernetes/client-node';
import type { BunKubeTransport } from './transport.ts';

/**
 * client-node's generated API classes (CoreV1Api, CoordinationV1Api, ...) on our Bun transport,
 * for code that wants them: their own HTTP path hands TLS to undici's Agent, which Bun's stand-in
 * ignores. Credentials, TLS, rate limit and metrics come from the transport, so no auth method is
 * configured here (client-node's would attach an undici dispatcher). edge-ccm's controllers use
 * ResourceClient instead: decoding through ObjectSerializer costs more than the plain JSON they need.
 */
export function makeGeneratedApi<T>(transport: BunKubeTransport, Api: new (config: Configuration) => T): T {
  const http: PromiseHttpLibrary = {
    async send(ctx: RequestContext): Promise<ResponseContext> {
      const url = new URL(ctx.getUrl());
      const body = ctx.getBody();
      if (body !== undefined && typeof body !== 'string') throw new Error('only string request bodies are supported');
      const res = await transport.sendRaw({
        method: ctx.getHttpMethod() as HttpMethod & ('GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'),
        path: url.pathname + url.search,
        rawBody: body,
        contentType: ctx.getHeaders()['Content-Type'] ?? ctx.getHeaders()['content-type'],
        signal: ctx.getSignal(),
      });
      // The generated code reads headers["content-type"]: a plain object with lowercase keys.
      const headers: Record<string, string> = {};
      res.headers.forEach((value, key) => (headers[key.toLowerCase()] = value));
      const bytes = Buffer.from(await res.arrayBuffer());
      return new ResponseContext(res.status, headers, new SelfDecodingBody(Promise.resolve(bytes)));
    },
  };
  return new Api(createConfiguration({ baseServer: new ServerConfiguration(transport.server, {}), httpApi: wrapHttpLibrary(http), authMethods: {} }));
}
