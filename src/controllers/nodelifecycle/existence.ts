import { forEachLimited } from '../../util/parallel.ts';
import type { V1Node } from '@kubernetes/client-node';
import { unmatchedBulkAnswer, type Existence, type Instances } from '../../cloud/types.ts';
import { nodeName } from '../../kube/node-helpers.ts';
import { errorMessage } from '../../util/errors.ts';
import { Deadline } from '../../util/deadline.ts';
import { NOT_FULFILLED, fulfilledValue } from '../../util/settled.ts';

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
  const deadline = providerDeadline(timeoutMs, parent);
  try {
    return await deadline.run(call);
  } finally {
    deadline.dispose();
  }
}

/** The deadline of one lifecycle pass: every provider call of the pass shares it (one timer, one signal). */
export function providerDeadline(timeoutMs: number, parent?: AbortSignal): Deadline {
  return new Deadline(timeoutMs, parent, () => new ProviderTimeoutError(timeoutMs));
}

export interface ExistenceOptions {
  /** The pass's deadline; without one, the call(s) of this question get their own of `timeoutMs`. */
  deadline?: Deadline;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Told about every call that failed, so the reason reaches the log. */
  onError?: (nodes: V1Node[], error: string) => void;
}

/**
 * One answer per node, the i-th about nodes[i]. Uses the provider's bulk call when it has one (one
 * call per period, whatever the number of NotReady nodes), else one call per node with bounded
 * concurrency.
 */
export async function askExistence(instances: Instances, nodes: readonly V1Node[], opts: ExistenceOptions): Promise<Existence[]> {
  const answers = new Array<Existence>(nodes.length).fill('unknown');
  if (nodes.length === 0) return answers;
  const deadline = opts.deadline ?? providerDeadline(opts.timeoutMs, opts.signal);
  try {
    if (instances.instancesExist) {
      const bulk = instances.instancesExist.bind(instances);
      let reply: unknown;
      try {
        // The list itself, not a copy (every period, every node): the provider only reads it.
        reply = await deadline.run((signal) => bulk(nodes, signal));
      } catch (e) {
        opts.onError?.([...nodes], errorMessage(e));
        return answers;
      }
      // Answers are by position: a reply of another length cannot be matched to the nodes.
      const unmatched = unmatchedBulkAnswer(reply, nodes.length);
      if (unmatched !== undefined) {
        opts.onError?.([...nodes], `the provider's ${unmatched}`);
        return answers;
      }
      const list = reply as readonly unknown[]; // matched: a list, one entry per node
      // The usual reply (a valid answer for each node) is taken as it is: it is only read from here on.
      if (everyAnswerValid(list)) return list as Existence[];
      for (let i = 0; i < list.length; i++) answers[i] = validExistence(list[i]);
      return answers;
    }
    const failed: V1Node[] = [];
    let failure = '';
    await forEachLimited(nodes, EXISTENCE_CHECK_CONCURRENCY, async (node, i) => {
      let answer: Existence = 'unknown';
      try {
        answer = validExistence(await deadline.run((signal) => instances.instanceExists(node, signal)));
      } catch (e) {
        // Past the deadline every remaining node fails alike: told once, not once per node.
        if (deadline.passed) {
          failed.push(node);
          failure ||= errorMessage(e);
        } else {
          opts.onError?.([node], errorMessage(e));
        }
      }
      answers[i] = answer;
    });
    if (failed.length > 0) opts.onError?.(failed, failure);
    return answers;
  } finally {
    if (!opts.deadline) deadline.dispose();
  }
}

/**
 * Asks about each node whether its machine is shut down, at most `concurrency` questions in
 * flight, and awaits `onShutdown` for each node answered true before that slot asks again (the
 * taint write). Failures are told to onError and count as "cannot tell". This runs for every
 * NotReady node every period, so an answer the provider has already given when its call returns
 * (an inventory in memory) is taken at once: no race against the deadline, no await, no promise
 * of ours per node; only pending answers are raced and awaited.
 */
export async function forEachShutDown(
  instances: Instances,
  nodes: readonly V1Node[],
  concurrency: number,
  opts: ExistenceOptions & { deadline: Deadline },
  onShutdown: (node: V1Node) => Promise<void>,
): Promise<void> {
  const { deadline } = opts;
  let next = 0;
  let known: Promise<boolean | undefined> | undefined;
  let knownValue: boolean | undefined;
  const worker = async () => {
    while (next < nodes.length) {
      const node = nodes[next++] as V1Node;
      let answer: boolean | undefined;
      try {
        if (deadline.passed) throw deadline.signal.reason;
        const call = instances.instanceShutdown(node, deadline.signal);
        // A provider answering from memory may hand out one shared promise per answer
        // (util/settled.ts): its value, once read, is not read again (each read allocates).
        const given = call === known ? knownValue : fulfilledValue(call);
        if (given !== NOT_FULFILLED) {
          known = call;
          knownValue = given;
        }
        answer = given !== NOT_FULFILLED ? given : await deadline.race(call);
      } catch (e) {
        opts.onError?.([node], errorMessage(e));
      }
      if (answer === true) await onShutdown(node);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, nodes.length)) }, worker));
}

/** Whether each answer is one of the three: a plain loop, no closure per node (every period, every node). */
function everyAnswerValid(reply: readonly unknown[]): boolean {
  for (let i = 0; i < reply.length; i++) if (!EXISTENCE_VALUES.has(reply[i])) return false;
  return true;
}

function validExistence(value: unknown): Existence {
  return EXISTENCE_VALUES.has(value) ? (value as Existence) : 'unknown';
}

