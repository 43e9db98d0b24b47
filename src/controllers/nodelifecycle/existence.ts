import { forEachLimited } from '../../util/parallel.ts';
import type { V1Node } from '@kubernetes/client-node';
import type { Existence, Instances } from '../../cloud/types.ts';
import { nodeName } from '../../kube/node-helpers.ts';
import { errorMessage } from '../../util/errors.ts';

/**
 * Asking the provider about machines, so that nothing it does can make the controller act on a
 * non-answer: a throw, a hang past the timeout, a missing or malformed bulk entry all become
 * "unknown".
 */

/** Provider calls in flight at once when asking node by node. */
export const EXISTENCE_CHECK_CONCURRENCY = 10;

const EXISTENCE_VALUES: ReadonlySet<unknown> = new Set<Existence>(['exists', 'not-found', 'unknown']);

export class ProviderTimeoutError extends Error {
  constructor(readonly ms: number) {
    super(`provider did not answer within ${ms}ms`);
    this.name = 'ProviderTimeoutError';
  }
}

/**
 * Runs a provider call with its own signal, aborted after `timeoutMs` or when `parent` aborts; the
 * result is not awaited past that point even if the provider ignores its signal.
 */
export async function withTimeout<T>(call: (signal: AbortSignal) => Promise<T>, timeoutMs: number, parent?: AbortSignal): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new ProviderTimeoutError(timeoutMs)), timeoutMs);
  const onParentAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) onParentAbort();
  else parent?.addEventListener('abort', onParentAbort, { once: true });
  const aborted = new Promise<never>((_, reject) => {
    if (controller.signal.aborted) reject(controller.signal.reason);
    else controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
  });
  aborted.catch(() => {}); // settles after the race is decided when nothing timed out
  try {
    return await Promise.race([call(controller.signal), aborted]);
  } finally {
    clearTimeout(timer);
    parent?.removeEventListener('abort', onParentAbort);
  }
}

export interface ExistenceOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Told about every call that failed, so the reason reaches the log. */
  onError?: (nodes: V1Node[], error: string) => void;
}

/**
 * One answer per node name. Uses the provider's bulk call when it has one (one call per period,
 * whatever the number of NotReady nodes), else one call per node with bounded concurrency.
 */
export async function askExistence(instances: Instances, nodes: readonly V1Node[], opts: ExistenceOptions): Promise<Map<string, Existence>> {
  const answers = new Map<string, Existence>();
  if (nodes.length === 0) return answers;
  if (instances.instancesExist) {
    const bulk = instances.instancesExist.bind(instances);
    let reply: Map<string, Existence> | undefined;
    try {
      reply = await withTimeout((signal) => bulk([...nodes], signal), opts.timeoutMs, opts.signal);
    } catch (e) {
      opts.onError?.([...nodes], errorMessage(e));
    }
    for (const node of nodes) answers.set(nodeName(node), validExistence(reply instanceof Map ? reply.get(nodeName(node)) : undefined));
    return answers;
  }
  await forEachLimited(nodes, EXISTENCE_CHECK_CONCURRENCY, async (node) => {
    let answer: Existence = 'unknown';
    try {
      answer = validExistence(await withTimeout((signal) => instances.instanceExists(node, signal), opts.timeoutMs, opts.signal));
    } catch (e) {
      opts.onError?.([node], errorMessage(e));
    }
    answers.set(nodeName(node), answer);
  });
  return answers;
}

/** Whether the machine is shut down: true, false, or undefined when the provider could not tell. */
export async function askShutdown(instances: Instances, node: V1Node, opts: ExistenceOptions): Promise<boolean | undefined> {
  try {
    const shutdown = await withTimeout((signal) => instances.instanceShutdown(node, signal), opts.timeoutMs, opts.signal);
    return typeof shutdown === 'boolean' ? shutdown : undefined;
  } catch (e) {
    opts.onError?.([node], errorMessage(e));
    return undefined;
  }
}

function validExistence(value: unknown): Existence {
  return EXISTENCE_VALUES.has(value) ? (value as Existence) : 'unknown';
}

