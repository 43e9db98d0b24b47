export { NODE_SYNC_KEY, SERVICE_LB_CONTROLLER, ServiceController, MAX_RETRY_DELAY_MS, MIN_RETRY_DELAY_MS, type ServiceControllerOptions } from './controller.ts';
export { LoadBalancerSync, retryAfterSeconds, type LoadBalancerOperation, type LoadBalancerSyncDeps } from './load-balancer-sync.ts';
export { ServiceControllerMetrics } from './metrics.ts';
export { addFinalizerPatch, loadBalancerStatusPatch, removeFinalizerPatch, type StrategicPatch } from './patches.ts';
export { KUBE_VIP_ANNOTATION, KUBE_VIP_OWNED_ANNOTATION } from '../../kube/service-helpers.ts';
export { KUBE_VIP_FIELD_MANAGER, kubeVipAddresses, kubeVipAnnotationPatch, type MergePatch } from './kube-vip.ts';
