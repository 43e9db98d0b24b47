/**
 * The client certificate as the transport hands it to Bun's TLS, so that what goes on the wire
 * is what client-go sends: the operator's certificate file, and not the cluster CA with it.
 *
 * Why: when a client certificate comes without a chain of its own, Bun (as OpenSSL's auto-chain
 * does) completes it from the trust store given as `ca`, and in a cluster the API server's CA
 * and the client certificate's issuer are the same certificate. So every client-certificate
 * request of edge-ccm arrived as [leaf, CA], and kube-apiserver, which verifies the presented
 * chain on every request with the extra certificates as intermediates, checked about three
 * signatures instead of one: its own CPU profile of a 5000-node burst showed x509 verification
 * at 5.2-5.7 s against 3.0-3.1 s for the Go reference over the same requests, and equal to it
 * once the CA was no longer sent (BENCHMARKS.md, run 8).
 *
 * Bun has no switch for the auto-chain; any explicit chain turns it off. The chain given is the
 * leaf once more: it certifies nothing, so a verifier building a path from the leaf's issuer
 * never picks it (Go's x509, OpenSSL's and BoringSSL's verifiers look intermediates up by the
 * issuer's name and key). A certificate file that carries its own chain (leaf and
 * intermediates) is passed as it is: Bun sends it unchanged.
 */

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The `cert` value for Bun's TLS options: the file as given, or its single certificate twice when a CA is configured. */
export function clientCertificateChain(certPem: string, caConfigured: boolean): string {
  const certificates = certPem.match(PEM_CERTIFICATE) ?? [];
  if (!caConfigured || certificates.length !== 1) return certPem;
  const [leaf] = certificates as [string];
  return `${leaf}\n${leaf}\n`;
}
