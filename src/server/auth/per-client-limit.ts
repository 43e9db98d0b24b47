import ipaddr from 'ipaddr.js';
import { InFlightPerKey } from '../../util/in-flight-per-key.ts';
import type { Authentication, Authenticator } from '../types.ts';

/** A client already has its share of reviews in flight: answered 429 with Retry-After. */
export class TooManyRequestsError extends Error {
  constructor(readonly retryAfterSeconds = 1) {
    super('too many token reviews in flight for this client');
  }
}

/**
 * How many TokenReviews one client address may have in flight. The reviews of all clients share
 * one budget (200/s, burst 400): without a share per client, a flood of random tokens from one
 * address queues everyone else's reviews behind its own. 10 is 50 ms of that budget; a client
 * whose token is cached is never counted, so a scraper never meets it.
 */
export const REVIEWS_IN_FLIGHT_PER_CLIENT = 10;

/**
 * Lets each client (by address, see clientKey) have at most `maxPerClient` token reviews in
 * flight, and refuses more at once (TooManyRequestsError) instead of queueing them. Sits behind
 * the token cache, so only tokens that need a review are counted.
 */
export class PerClientReviewLimit implements Authenticator {
  private readonly inFlight: InFlightPerKey;

  constructor(
    private readonly inner: Authenticator,
    maxPerClient = REVIEWS_IN_FLIGHT_PER_CLIENT,
  ) {
    this.inFlight = new InFlightPerKey(maxPerClient);
  }

  async authenticateToken(token: string, client = 'unknown'): Promise<Authentication> {
    if (!this.inFlight.tryAcquire(client)) throw new TooManyRequestsError();
    try {
      return await this.inner.authenticateToken(token, client);
    } finally {
      this.inFlight.release(client);
    }
  }
}

/**
 * The key a client's share is counted under: an IPv4 address as it is (also when it arrives
 * IPv4-mapped on a dual-stack socket), an IPv6 address by its /64, which one host can hold whole.
 */
export function clientKey(address: string | undefined): string {
  if (!address) return 'unknown';
  if (!ipaddr.isValid(address)) return address;
  const ip = ipaddr.process(address);
  if (ip.kind() === 'ipv4') return ip.toString();
  const prefix = ipaddr.IPv6.networkAddressFromCIDR(`${ip.toString()}/64`);
  return `${prefix.toString()}/64`;
}
