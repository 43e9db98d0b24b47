// The reference reader for edge-ccm's client-certificate authenticator: Go's crypto/x509 read the
// way kube-apiserver's x509 authenticator reads a client's chain (k8s.io/apiserver
// pkg/authentication/request/x509): every presented certificate parsed (Go's TLS server drops the
// connection otherwise), chain[0].Verify with the bundle as Roots, the rest as Intermediates and
// KeyUsages [ClientAuth]; user = Subject.CommonName, groups = Subject.Organization.
//
//	x509-verify generate   prints crafted cases as JSON: [{name, roots, chain, now}]
//	x509-verify verify     reads such cases on stdin, prints [{name, ok, error, user, groups}]
package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

type testCase struct {
	Name  string   `json:"name"`
	Roots []string `json:"roots"`
	Chain []string `json:"chain"`
	Now   string   `json:"now"`
}

type result struct {
	Name   string   `json:"name"`
	OK     bool     `json:"ok"`
	Error  string   `json:"error,omitempty"`
	User   string   `json:"user"`
	Groups []string `json:"groups"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: x509-verify generate|verify")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "generate":
		err = json.NewEncoder(os.Stdout).Encode(generate())
	case "verify":
		var cases []testCase
		if err = json.NewDecoder(os.Stdin).Decode(&cases); err == nil {
			out := make([]result, 0, len(cases))
			for _, c := range cases {
				out = append(out, verify(c))
			}
			err = json.NewEncoder(os.Stdout).Encode(out)
		}
	default:
		err = errors.New("unknown mode " + os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func verify(c testCase) result {
	r := result{Name: c.Name, Groups: []string{}}
	fail := func(err error) result { r.Error = err.Error(); return r }
	now, err := time.Parse(time.RFC3339Nano, c.Now)
	if err != nil {
		return fail(err)
	}
	roots := x509.NewCertPool()
	for _, p := range c.Roots {
		cert, err := parsePEM(p)
		if err != nil {
			return fail(fmt.Errorf("root: %w", err))
		}
		roots.AddCert(cert)
	}
	var chain []*x509.Certificate
	for _, p := range c.Chain {
		cert, err := parsePEM(p)
		if err != nil {
			return fail(fmt.Errorf("presented: %w", err))
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return fail(errors.New("no certificate"))
	}
	intermediates := x509.NewCertPool()
	for _, cert := range chain[1:] {
		intermediates.AddCert(cert)
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := chain[0].Verify(opts); err != nil {
		return fail(err)
	}
	r.OK = true
	r.User = chain[0].Subject.CommonName
	if chain[0].Subject.Organization != nil {
		r.Groups = chain[0].Subject.Organization
	}
	return r
}

func parsePEM(text string) (*x509.Certificate, error) {
	block, rest := pem.Decode([]byte(text))
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("not one PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}
