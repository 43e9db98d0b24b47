import * as v from 'valibot';
import type { ConfigIssue } from '../../config-file/issues.ts';
import { asRecord } from '../../config-file/schema.ts';
import { SecretFiles } from '../../config-file/secrets.ts';
import { yamlConfigLoader } from '../../config-file/yaml-load.ts';
import type { ControlPlaneEndpointConfig } from './config-model.ts';
import { resolveControlPlaneEndpoint } from './config-resolve.ts';
import { ControlPlaneEndpointSchema, salvageControlPlaneEndpoint, type ResolvableControlPlaneEndpoint } from './config-schema.ts';

/**
 * What `edge-ccm vip` reads of the controller's config file: the `controlPlaneEndpoint` section
 * alone, checked by the schema and second pass every provider's file uses for it. The provider's
 * sections are not read (no inventory, no Kubernetes credentials: the VIP comes up before any API server; a BGP peer's
 * passwordFile is read).
 */
const VipFileSchema = v.looseObject({ controlPlaneEndpoint: v.optional(ControlPlaneEndpointSchema) });

export const loadVipConfig = yamlConfigLoader<{ controlPlaneEndpoint?: ResolvableControlPlaneEndpoint }, ControlPlaneEndpointConfig>({
  schema: VipFileSchema,
  salvage: (input) => ({ controlPlaneEndpoint: salvageControlPlaneEndpoint(asRecord(input).controlPlaneEndpoint) }),
  resolve: (raw, secrets) => {
    const issues: ConfigIssue[] = [];
    const files = new SecretFiles(secrets);
    const config = resolveControlPlaneEndpoint(raw.controlPlaneEndpoint, (path, message) => issues.push({ path, message }), files);
    if (!raw.controlPlaneEndpoint) issues.push({ path: ['controlPlaneEndpoint'], message: 'required by edge-ccm vip (the address, the hosts)' });
    return { config: config!, issues, warnings: files.warnings };
  },
});
