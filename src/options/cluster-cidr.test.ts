import { describe, expect, test } from 'bun:test';
import { parseClusterCIDRs } from './cluster-cidr.ts';

describe('parseClusterCIDRs', () => {
  test.each([
    ['10.244.0.0/16', { ipv4: '10.244.0.0/16' }],
    ['fd00:10:244::/56', { ipv6: 'fd00:10:244::/56' }],
    ['10.244.0.0/16,fd00:10:244::/56', { ipv4: '10.244.0.0/16', ipv6: 'fd00:10:244::/56' }],
    ['fd00:10:244::/56,10.244.0.0/16', { ipv4: '10.244.0.0/16', ipv6: 'fd00:10:244::/56' }],
    [' 10.244.0.0/16 , fd00::/64 ', { ipv4: '10.244.0.0/16', ipv6: 'fd00::/64' }],
    // host bits are masked off, as Go's net.ParseCIDR does
    ['10.244.1.7/16', { ipv4: '10.244.0.0/16' }],
  ])('%p', (text, cidrs) => {
    expect(parseClusterCIDRs(text)).toEqual({ ok: true, cidrs });
  });

  test.each([
    ['', 'invalid CIDR ""'],
    ['10.244.0.0', 'invalid CIDR "10.244.0.0"'],
    ['10.244.0.0/33', 'invalid CIDR "10.244.0.0/33"'],
    ['banana/8', 'invalid CIDR "banana/8"'],
    ['10.0.0.0/8,', 'invalid CIDR ""'],
    ['10.0.0.0/8,192.168.0.0/16', 'two IPv4 CIDRs given'],
    ['fd00::/64,fd01::/64', 'two IPv6 CIDRs given'],
    ['10.0.0.0/8,fd00::/64,192.168.0.0/16', 'at most two CIDRs'],
  ])('%p is rejected', (text, message) => {
    const result = parseClusterCIDRs(text);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.join('\n')).toContain(message);
  });
});
