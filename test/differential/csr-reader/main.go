// csr-reader reads certificate signing requests as Kubernetes does, for the differential test of
// edge-ccm's CSR approver (test/integration/csr-differential.test.ts). Standard library only.
//
// Input: one JSON object per line on stdin, {"id": "...", "request": "<base64 of spec.request>",
// "usages": ["digital signature", ...]}. Output: one JSON object per line on stdout, in order:
//   - apiServer: the API server's validation of spec.request (pkg/apis/certificates/validation:
//     ParseCSR, that is pem.Decode, block type "CERTIFICATE REQUEST", x509.ParseCertificateRequest;
//     then CheckSignature);
//   - request: what crypto/x509 read (subject CN and O, SANs, key type);
//   - signer: the kubernetes.io/kubelet-serving signer (pkg/controller/certificates/signer:
//     ParseCSR, ValidateKubeletServingCSR, then authority.Sign: ParseCertificateRequest of the
//     block's bytes, CheckSignature, a template of the request's Subject, SANs and key), and the
//     certificate it signs read back: what a node would get.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"
)

type input struct {
	ID      string   `json:"id"`
	Request string   `json:"request"`
	Usages  []string `json:"usages"`
}

type reading struct {
	CommonName    string   `json:"cn"`
	Organizations []string `json:"o"`
	DNSNames      []string `json:"dns"`
	IPAddresses   []string `json:"ips"`
	Emails        []string `json:"emails"`
	URIs          []string `json:"uris"`
	KeyType       string   `json:"keyType,omitempty"`
}

type verdict struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type output struct {
	ID          string   `json:"id"`
	APIServer   verdict  `json:"apiServer"`
	Request     *reading `json:"request,omitempty"`
	SignatureOK bool     `json:"signatureOk"`
	Signer      verdict  `json:"signer"`
	Signed      *reading `json:"signed,omitempty"`
}

func main() {
	ca, caKey := newCA()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req input
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fatal("input line: %v", err)
		}
		pemBytes, err := base64.StdEncoding.DecodeString(req.Request)
		if err != nil {
			fatal("request %s: base64: %v", req.ID, err)
		}
		if err := enc.Encode(read(req.ID, pemBytes, req.Usages, ca, caKey)); err != nil {
			fatal("output: %v", err)
		}
	}
	if err := in.Err(); err != nil {
		fatal("input: %v", err)
	}
}

func read(id string, pemBytes []byte, usages []string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (o output) {
	o.ID = id
	csr, err := parseCSR(pemBytes)
	if err != nil {
		o.APIServer.Error = err.Error()
		o.Signer.Error = err.Error()
		return o
	}
	o.Request = readingOf(csr.Subject, csr.DNSNames, csr.IPAddresses, csr.EmailAddresses, csr.URIs)
	o.Request.KeyType = keyType(csr.PublicKey)
	if err := csr.CheckSignature(); err != nil {
		o.APIServer.Error = "signature: " + err.Error()
		o.Signer.Error = o.APIServer.Error
		return o
	}
	o.SignatureOK = true
	o.APIServer.OK = true
	if err := validateKubeletServingCSR(csr, usages); err != nil {
		o.Signer.Error = err.Error()
		return o
	}
	cert, err := sign(csr.Raw, ca, caKey)
	if err != nil {
		o.Signer.Error = err.Error()
		return o
	}
	o.Signer.OK = true
	o.Signed = readingOf(cert.Subject, cert.DNSNames, cert.IPAddresses, cert.EmailAddresses, cert.URIs)
	return o
}

// parseCSR is k8s.io/kubernetes pkg/apis/certificates ParseCSR.
func parseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// validateKubeletServingCSR is pkg/apis/certificates ValidateKubeletServingCSR, the signer's filter.
func validateKubeletServingCSR(req *x509.CertificateRequest, usages []string) error {
	if !reflect.DeepEqual([]string{"system:nodes"}, req.Subject.Organization) {
		return errors.New("subject organization is not system:nodes")
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return errors.New("DNS or IP subjectAltName is required")
	}
	if len(req.EmailAddresses) > 0 {
		return errors.New("Email subjectAltNames are not allowed")
	}
	if len(req.URIs) > 0 {
		return errors.New("URI subjectAltNames are not allowed")
	}
	set := map[string]bool{}
	for _, u := range usages {
		set[u] = true
	}
	withRSA := map[string]bool{"digital signature": true, "key encipherment": true, "server auth": true}
	noRSA := map[string]bool{"digital signature": true, "server auth": true}
	if !reflect.DeepEqual(set, withRSA) && !reflect.DeepEqual(set, noRSA) {
		return fmt.Errorf("usages did not match %v", usages)
	}
	if !strings.HasPrefix(req.Subject.CommonName, "system:node:") {
		return errors.New("subject common name does not begin with system:node:")
	}
	return nil
}

// sign is pkg/controller/certificates/authority Sign with the serving usages.
func sign(crDER []byte, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, error) {
	cr, err := x509.ParseCertificateRequest(crDER)
	if err != nil {
		return nil, fmt.Errorf("unable to parse certificate request: %v", err)
	}
	if err := cr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("unable to verify certificate request signature: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:       big.NewInt(now.UnixNano()),
		Subject:            cr.Subject,
		DNSNames:           cr.DNSNames,
		IPAddresses:        cr.IPAddresses,
		EmailAddresses:     cr.EmailAddresses,
		URIs:               cr.URIs,
		PublicKeyAlgorithm: cr.PublicKeyAlgorithm,
		PublicKey:          cr.PublicKey,
		Extensions:         cr.Extensions,
		ExtraExtensions:    cr.ExtraExtensions,
		NotBefore:          now.Add(-5 * time.Minute),
		NotAfter:           now.Add(time.Hour),
		KeyUsage:           x509.KeyUsageDigitalSignature,
		ExtKeyUsage:        []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, cr.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %v", err)
	}
	return x509.ParseCertificate(der)
}

func readingOf(subject pkix.Name, dns []string, ips []net.IP, emails []string, uris []*url.URL) *reading {
	r := &reading{CommonName: subject.CommonName, Organizations: nonNil(subject.Organization), DNSNames: nonNil(dns), Emails: nonNil(emails), IPAddresses: []string{}, URIs: []string{}}
	for _, ip := range ips {
		r.IPAddresses = append(r.IPAddresses, ip.String())
	}
	for _, u := range uris {
		r.URIs = append(r.URIs, u.String())
	}
	return r
}

func keyType(key any) string {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		return "ec-" + k.Curve.Params().Name
	case nil:
		return ""
	default:
		name := fmt.Sprintf("%T", key)
		return strings.TrimPrefix(strings.TrimSuffix(name, ".PublicKey"), "*")
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

func newCA() (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fatal("CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "csr-reader test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		fatal("CA: %v", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		fatal("CA: %v", err)
	}
	return ca, key
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "csr-reader: "+format+"\n", args...)
	os.Exit(1)
}
