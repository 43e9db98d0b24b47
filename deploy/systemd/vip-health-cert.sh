#!/bin/sh
# A client certificate for edge-ccm vip's health check (controlPlaneEndpoint.healthCheck), for an
# API server that refuses anonymous requests (k3s, RKE2, Talos). Signed by the cluster's client CA
# (the one kube-apiserver's --client-ca-file names), CN=edge-ccm-vip and no group (O=): it may read
# /readyz, /livez, /healthz and /version (system:public-info-viewer is bound to
# system:authenticated) and nothing else. Writes OUT_DIR/health.crt (0644) and OUT_DIR/health.key
# (0600); the CA key is only read. docs/install.md, "Control-plane VIP", says where the CA is on
# each distribution; test/integration/vip-health-check.test.ts runs this script against a real
# kube-apiserver started with --anonymous-auth=false.
#
# Usage: vip-health-cert.sh CLIENT_CA_CRT CLIENT_CA_KEY OUT_DIR [DAYS]   (DAYS: 3650 by default)
set -eu
if [ $# -lt 3 ]; then
  echo "usage: $0 CLIENT_CA_CRT CLIENT_CA_KEY OUT_DIR [DAYS]" >&2
  exit 2
fi
ca_crt=$1 ca_key=$2 out=$3 days=${4:-3650}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
umask 077
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=edge-ccm-vip \
  -keyout "$out/health.key" -out "$tmp/health.csr" 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$tmp/ext"
# A random serial: no serial file is written beside the CA.
openssl x509 -req -in "$tmp/health.csr" -CA "$ca_crt" -CAkey "$ca_key" -set_serial "0x$(openssl rand -hex 16)" \
  -days "$days" -extfile "$tmp/ext" -out "$out/health.crt" 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
chmod 0644 "$out/health.crt"
echo "wrote $out/health.crt (CN=edge-ccm-vip, $days days) and $out/health.key"
