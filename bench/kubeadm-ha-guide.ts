/**
 * The files of kubeadm's HA guide (kubernetes/kubeadm docs/ha-considerations.md, "keepalived
 * configuration" and "haproxy configuration"), with its placeholders filled in for the VIP lab and
 * nothing tuned: bench/vip-keepalived.ts runs them to compare with `edge-ccm vip`.
 */

/** The guide's ${STATE}/${PRIORITY}: one MASTER at 101, the others BACKUP at 100. */
export interface VrrpRole {
  state: 'MASTER' | 'BACKUP';
  priority: 101 | 100;
}

/** keepalived.conf as the guide writes it (advert_int left at keepalived's default, 1 s). */
export function keepalivedConf(o: { role: VrrpRole; interface: string; vip: string; checkScript: string }): string {
  return `! Configuration File for keepalived (kubeadm docs/ha-considerations.md)
global_defs {
    router_id LVS_DEVEL
}
vrrp_script check_apiserver {
  script "${o.checkScript}"
  interval 3
  weight -2
  fall 10
  rise 2
}

vrrp_instance VI_1 {
    state ${o.role.state}
    interface ${o.interface}
    virtual_router_id 51
    priority ${o.role.priority}
    authentication {
        auth_type PASS
        auth_pass 42
    }
    virtual_ipaddress {
        ${o.vip}
    }
    track_script {
        check_apiserver
    }
}
`;
}

/**
 * check_apiserver.sh as the guide writes it: the local endpoint, and the VIP's too when this host
 * holds it (`ip addr | grep`). `port` is the guide's APISERVER_DEST_PORT: the API server's own
 * port without haproxy, haproxy's with it.
 */
export function checkApiserverScript(vip: string, port: number): string {
  return `#!/bin/sh

errorExit() {
    echo "*** $*" 1>&2
    exit 1
}

curl --silent --max-time 2 --insecure https://localhost:${port}/ -o /dev/null || errorExit "Error GET https://localhost:${port}/"
if ip addr | grep -q ${vip}; then
    curl --silent --max-time 2 --insecure https://${vip}:${port}/ -o /dev/null || errorExit "Error GET https://${vip}:${port}/"
fi
`;
}

/**
 * haproxy.cfg as the guide writes it: a TCP frontend on `port` balancing round robin over every
 * API server, each checked with GET /healthz over TLS (haproxy's default check timing: every 2 s,
 * down after 3 failures, up after 2). The guide's `daemon` is overridden by haproxy -db (foreground).
 */
export function haproxyCfg(port: number, servers: { name: string; address: string; port: number }[]): string {
  return `# haproxy.cfg (kubeadm docs/ha-considerations.md)
global
    log stdout format raw local0
    daemon

defaults
    mode                    http
    log                     global
    option                  httplog
    option                  dontlognull
    option http-server-close
    option forwardfor       except 127.0.0.0/8
    option                  redispatch
    retries                 1
    timeout http-request    10s
    timeout queue           20s
    timeout connect         5s
    timeout client          35s
    timeout server          35s
    timeout http-keep-alive 10s
    timeout check           10s

frontend apiserver
    bind *:${port}
    mode tcp
    option tcplog
    default_backend apiserverbackend

backend apiserverbackend
    option httpchk

    http-check connect ssl
    http-check send meth GET uri /healthz
    http-check expect status 200

    mode tcp
    balance     roundrobin

${servers.map((s) => `    server ${s.name} ${s.address}:${s.port} check verify none`).join('\n')}
`;
}
