/**
 * Which of a VM's addresses its node gets: the selection every API provider makes, written once
 * in src/node-addresses (its tests stay here, where they were written).
 */
export { selectAddresses, nodeAddresses as vmNodeAddresses } from '../../src/node-addresses/select.ts';
