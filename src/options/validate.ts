/**
 * Validation of the scanned flag values with valibot: each flag's own schema from the table, then
 * the rules that tie flags together (upstream's leader-election and serving checks). Every issue
 * is reported, each under the flag it is about.
 */
import * as v from 'valibot';
import type { FlagError } from './errors.ts';
import { formatGoDuration } from '../util/duration.ts';
import { resolveFeatureGates } from './feature-gates.ts';
import { FLAGS, flagByKey, flagLabel, type FlagKey, type FlagValues } from './flags.ts';

/** client-go's leaderelection.JitterFactor: the renew deadline must exceed 1.2 x the retry period. */
const LEADER_ELECTION_JITTER = 1.2;

export interface ValidationContext {
  /** --cloud-provider is needed to run the manager, not to print help or to run a subcommand. */
  requireCloudProvider: boolean;
  /** Keys of flags whose text could not be read (already reported): checks on the value they kept would only confuse. */
  unreadable: ReadonlySet<string>;
}

/** Reports a problem under `key`; `related` names the other flags the rule compares it with. */
type AddIssue = (key: FlagKey, message: string, related?: FlagKey[]) => void;

export function validateFlagValues(
  values: Record<string, unknown>,
  context: ValidationContext,
): { ok: true; values: FlagValues } | { ok: false; errors: FlagError[] } {
  const result = v.safeParse(optionsSchema(context), values);
  if (result.success) return { ok: true, values: result.output };
  const relevant = result.issues.filter((issue) => !context.unreadable.has(issueKey(issue) ?? ''));
  return { ok: false, errors: relevant.map(issueToFlagError) };
}

function optionsSchema(context: ValidationContext): v.GenericSchema<unknown, FlagValues> {
  const perFlag = Object.fromEntries(FLAGS.map((def) => [def.key, def.schema ?? v.unknown()]));
  return v.pipe(
    v.object(perFlag) as unknown as v.GenericSchema<unknown, FlagValues>,
    v.rawCheck(({ dataset, addIssue }) => {
      const values = dataset.value as FlagValues;
      crossFlagChecks(values, context, (key, message, related = []) => {
        // A rule comparing with an unreadable flag's default would only confuse.
        if (related.some((other) => context.unreadable.has(other))) return;
        addIssue({ message, path: [{ type: 'object', origin: 'value', input: values, key, value: values[key] }] });
      });
    }),
  );
}

function crossFlagChecks(o: FlagValues, context: ValidationContext, issue: AddIssue): void {
  if (context.requireCloudProvider && o.cloudProvider === '') issue('cloudProvider', 'is required');

  const certGiven = o.tlsCertFile !== '';
  const keyGiven = o.tlsPrivateKeyFile !== '';
  if (certGiven && !keyGiven) issue('tlsPrivateKeyFile', 'is required when --tls-cert-file is set', ['tlsCertFile']);
  if (keyGiven && !certGiven) issue('tlsCertFile', 'is required when --tls-private-key-file is set', ['tlsPrivateKeyFile']);

  if (o.leaderElect) leaderElectionChecks(o, issue);

  if (o.webhookSecurePort !== 0 && o.webhookSecurePort === o.securePort) {
    issue('webhookSecurePort', 'cannot be the same value as --secure-port', ['securePort']);
  }
  loggingChecks(o, issue);
}

/** component-base's logs ValidateAndApply: vmodule only for text, the alpha options only behind their gate. */
function loggingChecks(o: FlagValues, issue: AddIssue): void {
  if (o.vmodule.trim() !== '' && o.loggingFormat !== 'text') issue('vmodule', 'Only supported for text log format', ['loggingFormat']);
  const gates = resolveFeatureGates(o.featureGates);
  const alpha = gates.ok && gates.gates.enabled('LoggingAlphaOptions');
  if (alpha || !gates.ok) return;
  if (o.logTextSplitStream) issue('logTextSplitStream', 'Feature LoggingAlphaOptions is disabled (add --feature-gates=LoggingAlphaOptions=true)', ['featureGates']);
  if (o.logJsonSplitStream) issue('logJsonSplitStream', 'Feature LoggingAlphaOptions is disabled (add --feature-gates=LoggingAlphaOptions=true)', ['featureGates']);
}

/** component-base's ValidateLeaderElectionConfiguration plus client-go's NewLeaderElector checks. */
function leaderElectionChecks(o: FlagValues, issue: AddIssue): void {
  const lease = o.leaderElectLeaseDurationMs;
  const renew = o.leaderElectRenewDeadlineMs;
  const retry = o.leaderElectRetryPeriodMs;
  const positive: [FlagKey, number][] = [
    ['leaderElectLeaseDurationMs', lease],
    ['leaderElectRenewDeadlineMs', renew],
    ['leaderElectRetryPeriodMs', retry],
  ];
  for (const [key, ms] of positive) if (ms <= 0) issue(key, `must be greater than zero, got ${formatGoDuration(ms)}`);
  if (renew > 0 && lease <= renew) {
    issue(
      'leaderElectRenewDeadlineMs',
      `${formatGoDuration(renew)} must be less than --leader-elect-lease-duration (${formatGoDuration(lease)})`,
      ['leaderElectLeaseDurationMs'],
    );
  }
  if (retry > 0 && renew <= LEADER_ELECTION_JITTER * retry) {
    issue(
      'leaderElectRetryPeriodMs',
      `${formatGoDuration(retry)} is too long: --leader-elect-renew-deadline (${formatGoDuration(renew)}) must be ` +
        `greater than ${LEADER_ELECTION_JITTER} x --leader-elect-retry-period`,
      ['leaderElectRenewDeadlineMs'],
    );
  }
  if (o.leaderElectResourceLock !== 'leases') {
    issue('leaderElectResourceLock', `unsupported lock type ${JSON.stringify(o.leaderElectResourceLock)}: must be "leases"`);
  }
  if (o.leaderElectResourceName === '') issue('leaderElectResourceName', 'is required when --leader-elect is set');
  if (o.leaderElectResourceNamespace === '') issue('leaderElectResourceNamespace', 'is required when --leader-elect is set');
}

function issueKey(issue: v.BaseIssue<unknown>): string | undefined {
  const key = issue.path?.[0]?.key;
  return typeof key === 'string' ? key : undefined;
}

function issueToFlagError(issue: v.BaseIssue<unknown>): FlagError {
  const key = issueKey(issue);
  const def = key === undefined ? undefined : flagByKey(key);
  return { flag: def ? flagLabel(def) : '(flags)', message: issue.message };
}
