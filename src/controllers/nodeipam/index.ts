export { NodeIPAMController, NODE_IPAM_CONTROLLER, type NodeIPAMContext, type NodeIPAMControllerOptions } from './controller.ts';
export { resolveNodeIPAMOptions, CIDR_ALLOCATOR_TYPES, DEFAULT_NODE_MASK_SIZE, type CIDRAllocatorType, type NodeIPAMOptions } from './options.ts';
