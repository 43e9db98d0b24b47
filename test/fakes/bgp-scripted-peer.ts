import type { Socket, TCPSocketListener } from 'bun';
import { Afi, MessageType, Safi } from '../../src/net/bgp/constants.ts';
import { decodeMessage, encodeKeepalive, encodeNotification, Framer, frame, type Message } from '../../src/net/bgp/message.ts';
import { type Capabilities, emptyCapabilities, encodeOpenBody } from '../../src/net/bgp/open.ts';
import type { UpdateContext } from '../../src/net/bgp/update.ts';
import { eventually } from '../harness/eventually.ts';

/**
 * A BGP peer played by a test over real loopback TCP: it accepts the speaker's connections,
 * decodes everything the speaker sends with the codec, and sends whatever bytes the test
 * writes (well-formed OPENs and KEEPALIVEs, or a malformed corpus).
 */
export class ScriptedConnection {
  readonly received: Message[] = [];
  closed = false;
  /** How the speaker's UPDATEs are decoded: set from what this side offered in its OPEN. */
  ctx: UpdateContext = { fourOctetAs: true, addPath: { 4: false, 6: false } };
  private readonly framer = new Framer();
  decodeError: unknown;

  constructor(private readonly socket: Socket<unknown>) {}

  onData(chunk: Uint8Array): void {
    try {
      for (const raw of this.framer.push(chunk)) this.received.push(decodeMessage(raw, this.ctx));
    } catch (e) {
      this.decodeError = e;
    }
  }

  send(bytes: Uint8Array): void {
    this.socket.write(bytes);
  }

  sendOpen(o: { asn: number; holdTime?: number; bgpId?: number; caps?: Partial<Capabilities>; myAs?: number }): void {
    const caps: Capabilities = {
      ...emptyCapabilities(),
      multiprotocol: [
        { afi: Afi.IPV4, safi: Safi.UNICAST },
        { afi: Afi.IPV6, safi: Safi.UNICAST },
      ],
      routeRefresh: true,
      fourOctetAs: o.asn,
      ...o.caps,
    };
    this.ctx = {
      fourOctetAs: caps.fourOctetAs !== undefined,
      addPath: {
        4: caps.addPath.some((a) => a.afi === Afi.IPV4 && a.receive),
        6: caps.addPath.some((a) => a.afi === Afi.IPV6 && a.receive),
      },
    };
    const myAs = o.myAs ?? (o.asn > 0xffff ? 23456 : o.asn);
    this.send(frame(MessageType.OPEN, encodeOpenBody({ myAs, holdTime: o.holdTime ?? 90, bgpId: o.bgpId ?? 0xcb007101, capabilities: caps })));
  }

  sendKeepalive(): void {
    this.send(encodeKeepalive());
  }

  sendNotification(code: number, subcode: number): void {
    this.send(encodeNotification(code, subcode));
  }

  /** OPEN and KEEPALIVE from our side, then wait for the speaker's KEEPALIVE after its OPEN. */
  async establish(o: Parameters<ScriptedConnection['sendOpen']>[0]): Promise<void> {
    await this.waitFor('the speaker OPEN', (m) => m.type === 'open');
    this.sendOpen(o);
    this.sendKeepalive();
    await this.waitFor('the speaker KEEPALIVE', (m) => m.type === 'keepalive');
  }

  of<T extends Message['type']>(type: T): Extract<Message, { type: T }>[] {
    return this.received.filter((m) => m.type === type) as Extract<Message, { type: T }>[];
  }

  async waitFor<T extends Message>(what: string, match: (m: Message) => m is T): Promise<T>;
  async waitFor(what: string, match: (m: Message) => boolean): Promise<Message>;
  async waitFor(what: string, match: (m: Message) => boolean): Promise<Message> {
    return eventually(`${what} (received: ${this.received.map((m) => m.type).join(',')})`, () => this.received.find(match), 15_000, 10);
  }

  async waitClosed(): Promise<void> {
    await eventually('the speaker to close the connection', () => this.closed, 15_000, 10);
  }

  close(): void {
    this.socket.end();
  }
}

export class ScriptedPeer {
  readonly connections: ScriptedConnection[] = [];

  private constructor(private readonly listener: TCPSocketListener<{ conn?: ScriptedConnection }>) {}

  static listen(hostname = '127.0.0.1', port = 0): ScriptedPeer {
    let self: ScriptedPeer | undefined;
    const listener = Bun.listen<{ conn?: ScriptedConnection }>({
      hostname,
      port,
      socket: {
        open(socket) {
          const conn = new ScriptedConnection(socket as Socket<unknown>);
          socket.data = { conn };
          self?.connections.push(conn);
        },
        data(socket, chunk) {
          socket.data?.conn?.onData(chunk);
        },
        close(socket) {
          if (socket.data?.conn) socket.data.conn.closed = true;
        },
        error(socket) {
          if (socket.data?.conn) socket.data.conn.closed = true;
        },
      },
    });
    self = new ScriptedPeer(listener);
    return self;
  }

  get port(): number {
    return this.listener.port;
  }

  /** A connection this side opens to the speaker's listener (for collisions). */
  static async dial(hostname: string, port: number): Promise<ScriptedConnection> {
    let conn: ScriptedConnection | undefined;
    await Bun.connect({
      hostname,
      port,
      socket: {
        open(socket) {
          conn = new ScriptedConnection(socket as Socket<unknown>);
        },
        data(_socket, chunk) {
          conn?.onData(chunk);
        },
        close() {
          if (conn) conn.closed = true;
        },
        error() {
          if (conn) conn.closed = true;
        },
      },
    });
    if (!conn) throw new Error(`no connection to ${hostname}:${port}`);
    return conn;
  }

  /** The n-th connection the speaker made (0-based), once it is there. */
  async connection(n: number): Promise<ScriptedConnection> {
    return eventually(`connection #${n} from the speaker`, () => this.connections[n], 15_000, 10);
  }

  stop(): void {
    this.listener.stop(true);
  }
}
