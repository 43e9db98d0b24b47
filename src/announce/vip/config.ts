import * as v from 'valibot';
import type { ConfigIssue, ConfigPath } from '../../config-file/issues.ts';
import { asRecord } from '../../config-file/schema.ts';
import { SecretFiles } from '../../config-file/secrets.ts';
import { yamlConfigLoader } from '../../config-file/yaml-load.ts';
import type { ControlPlaneEndpointConfig } from './config-model.ts';
import { resolveControlPlaneEndpoint } from './config-resolve.ts';
import { ControlPlaneEndpointSchema, salvageControlPlaneEndpoint, type ResolvableControlPlaneEndpoint } from './config-schema.ts';
import { readHealthCredentials } from './health-credentials.ts';
import type { HealthRequest } from './health-connection.ts';

/**
 * What `edge-ccm vip` reads of the controller's config file: the `controlPlaneEndpoint` section
 * alone, checked by the schema and second pass every provider's file uses for it, and the files
 * its `healthCheck` names and a BGP peer's passwordFile (read here, at the start: only `edge-ccm
 * vip` runs the check and the sessions, so only it reads them; a problem with one is reported at
 * its key and line like any other). The provider's sections are not read (no inventory, no
 * Kubernetes credentials: the VIP comes up before any API server).
 */
const VipFileSchema = v.looseObject({ controlPlaneEndpoint: v.optional(ControlPlaneEndpointSchema) });

export interface VipConfig extends ControlPlaneEndpointConfig {
  /** What the health check sends and verifies (holds the credential: never logged). */
  healthRequest: HealthRequest;
}

export const loadVipConfig = yamlConfigLoader<{ controlPlaneEndpoint?: ResolvableControlPlaneEndpoint }, VipConfig>({
  schema: VipFileSchema,
  salvage: (input) => ({ controlPlaneEndpoint: salvageControlPlaneEndpoint(asRecord(input).controlPlaneEndpoint) }),
  resolve: (raw, secrets) => {
    const issues: ConfigIssue[] = [];
    const report = (path: ConfigPath, message: string) => issues.push({ path, message });
    const files = new SecretFiles(secrets);
    const config = resolveControlPlaneEndpoint(raw.controlPlaneEndpoint, report, files);
    if (!raw.controlPlaneEndpoint) issues.push({ path: ['controlPlaneEndpoint'], message: 'required by edge-ccm vip (the address, the hosts)' });
    const healthRequest = config && readHealthCredentials(config.healthCheck, report, secrets);
    return { config: { ...config!, healthRequest: healthRequest! }, issues, warnings: files.warnings };
  },
});
