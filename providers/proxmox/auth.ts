import type { ClusterAuth } from './config-model.ts';

/**
 * The two ways to authenticate to the Proxmox VE API:
 * - an API token: header `Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET` on every request;
 * - user and password: POST /access/ticket gives a ticket (cookie PVEAuthCookie, valid two
 *   hours) and a CSRFPreventionToken (needed for writes only; this provider only reads). The
 *   ticket is replaced when older than ticketRenewSeconds, and at once when the API answers 401.
 */

export interface Ticket {
  ticket: string;
  csrfToken: string;
}

export interface ProxmoxAuthenticator {
  headers(): Promise<Record<string, string>>;
  /** The API refused the credentials just used: forget what can be renewed. */
  refused(): boolean;
}

export function tokenHeader(tokenId: string, secret: string): string {
  return `PVEAPIToken=${tokenId}=${secret}`;
}

export class TokenAuthenticator implements ProxmoxAuthenticator {
  constructor(private readonly tokenId: string, private readonly secret: string) {}

  async headers(): Promise<Record<string, string>> {
    return { authorization: tokenHeader(this.tokenId, this.secret) };
  }

  /** A token cannot be renewed: a 401 stays a 401. */
  refused(): boolean {
    return false;
  }
}

export class TicketAuthenticator implements ProxmoxAuthenticator {
  private current?: { ticket: Ticket; at: number };
  private pending?: Promise<Ticket>;

  constructor(
    private readonly renewMs: number,
    private readonly login: () => Promise<Ticket>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  async headers(): Promise<Record<string, string>> {
    const ticket = await this.ticket();
    return { cookie: `PVEAuthCookie=${ticket.ticket}`, csrfpreventiontoken: ticket.csrfToken };
  }

  /** True when there was a ticket to drop, so a retry with a new one can help. */
  refused(): boolean {
    const had = this.current !== undefined;
    this.current = undefined;
    return had;
  }

  private async ticket(): Promise<Ticket> {
    if (this.current && this.now() - this.current.at < this.renewMs) return this.current.ticket;
    // One login for every request that needs it at once, not tied to any one caller's signal.
    this.pending ??= this.login()
      .then((ticket) => {
        this.current = { ticket, at: this.now() };
        return ticket;
      })
      .finally(() => (this.pending = undefined));
    return this.pending;
  }
}

export function authenticatorFor(auth: ClusterAuth, login: () => Promise<Ticket>, now?: () => number): ProxmoxAuthenticator {
  return auth.kind === 'token' ? new TokenAuthenticator(auth.tokenId, auth.secret) : new TicketAuthenticator(auth.renewMs, login, now);
}
