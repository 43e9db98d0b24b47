/** The cloud node lifecycle controller's public face. */
export { CLOUD_NODE_LIFECYCLE_CONTROLLER, CloudNodeLifecycleController, type LifecycleControllerDeps, type MonitorReport, WRITE_CONCURRENCY } from './controller.ts';
export { type Decision, type HoldReason, type LifecycleAction, type NotFoundStreak, decide } from './decide.ts';
export { type BreakerInput, type BreakerVerdict, DeletionWindow, allowedGone, evaluateBreaker } from './breaker.ts';
export { EXISTENCE_CHECK_CONCURRENCY, type ExistenceOptions, ProviderTimeoutError, askExistence, forEachShutDown, providerDeadline, withTimeout } from './existence.ts';
export {
  ANNOTATION_ACKNOWLEDGE_DELETION,
  ANNOTATION_PROTECT_FROM_DELETION,
  QUARANTINE_TAINT,
  SHUTDOWN_TAINT,
  TAINT_INSTANCE_NOT_FOUND,
  isDeletionAcknowledged,
  isProtected,
} from './keys.ts';
export { type HeldReason, NodeLifecycleMetrics } from './metrics.ts';
export {
  DISTRUST_REASONS,
  type Distrust,
  type GroupJudgement,
  ProviderSnapshots,
  type SnapshotJudgement,
  type SnapshotOptions,
  describeGroup,
  providerIDScheme,
} from './snapshot.ts';
export { ApiLifecycleWriter, type DeleteOutcome, type LifecycleWriter, TAINT_UPDATE_ATTEMPTS } from './writer.ts';
export {
  type BreakerOptions,
  DEFAULT_LIFECYCLE_OPTIONS,
  DELETION_POLICIES,
  type DeletionPolicy,
  type LifecycleOptions,
  type LifecycleOptionsInput,
  UPSTREAM_COMPATIBLE_OPTIONS,
  resolveLifecycleOptions,
  shrinkConfirmReads,
} from './options.ts';
