package main

// Crafted chains, one per way a hand-made verifier or subject reader can part from Go's.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// now is the verification time of every case: certificates are valid from an hour before to a day after.
var now = time.Now().UTC().Truncate(time.Second)

type node struct {
	cert *x509.Certificate
	key  crypto.Signer
	pem  string
}

var serial int64

func ecKey() crypto.Signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	return k
}

var rsaKeyCache crypto.Signer

func rsaKey() crypto.Signer {
	if rsaKeyCache == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		must(err)
		rsaKeyCache = k
	}
	return rsaKeyCache
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func base(cn string) *x509.Certificate {
	serial++
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}
}

func caTemplate(cn string) *x509.Certificate {
	t := base(cn)
	t.BasicConstraintsValid = true
	t.IsCA = true
	t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	return t
}

func leafTemplate(cn string, orgs ...string) *x509.Certificate {
	t := base(cn)
	t.Subject.Organization = orgs
	t.BasicConstraintsValid = true
	t.KeyUsage = x509.KeyUsageDigitalSignature
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return t
}

// issue signs tmpl with parent (self-signed when parent is nil) over a new key (or key, when given).
func issue(tmpl *x509.Certificate, parent *node, key ...crypto.Signer) *node {
	k := ecKey()
	if len(key) > 0 {
		k = key[0]
	}
	parentCert, parentKey := tmpl, k
	if parent != nil {
		parentCert, parentKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, k.Public(), parentKey)
	must(err)
	cert, err := x509.ParseCertificate(der)
	if err != nil { // a deliberately unparseable certificate: keep its bytes
		cert = &x509.Certificate{Raw: der}
	}
	return &node{cert: cert, key: k, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// tlv is one DER element with a short or long length.
func tlv(tag byte, content []byte) []byte {
	n := len(content)
	switch {
	case n < 0x80:
		return append([]byte{tag, byte(n)}, content...)
	case n < 0x100:
		return append([]byte{tag, 0x81, byte(n)}, content...)
	default:
		return append([]byte{tag, 0x82, byte(n >> 8), byte(n)}, content...)
	}
}

type attr struct {
	oid   asn1.ObjectIdentifier
	tag   byte
	value string
}

var (
	oidCN = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidO  = asn1.ObjectIdentifier{2, 5, 4, 10}
)

func cn(tag byte, v string) attr { return attr{oidCN, tag, v} }
func o(tag byte, v string) attr  { return attr{oidO, tag, v} }

// rawName encodes RDNs as given: each inner slice one RDN (several attributes: a multi-valued RDN).
func rawName(rdns ...[]attr) []byte {
	var seq []byte
	for _, rdn := range rdns {
		var set []byte
		for _, a := range rdn {
			oid, err := asn1.Marshal(a.oid)
			must(err)
			set = append(set, tlv(0x30, append(oid, tlv(a.tag, []byte(a.value))...))...)
		}
		seq = append(seq, tlv(0x31, set)...)
	}
	return tlv(0x30, seq)
}

const (
	utf8Tag      = 0x0c
	printableTag = 0x13
	t61Tag       = 0x14
	ia5Tag       = 0x16
	bmpTag       = 0x1e
	octetTag     = 0x04
	integerTag   = 0x02
	numericTag   = 0x12
	visibleTag   = 0x1a
)

func rdn(a ...attr) []attr { return a }

func generate() []testCase {
	var cases []testCase
	add := func(name string, roots []*node, chain ...*node) {
		c := testCase{Name: name, Now: now.Format(time.RFC3339Nano)}
		for _, r := range roots {
			c.Roots = append(c.Roots, r.pem)
		}
		for _, n := range chain {
			c.Chain = append(c.Chain, n.pem)
		}
		cases = append(cases, c)
	}
	root := issue(caTemplate("root"), nil)
	roots := []*node{root}
	inter := issue(caTemplate("intermediate"), root)

	add("good: leaf under an intermediate", roots, issue(leafTemplate("alice", "team-a", "team-b"), inter), inter)
	add("good: leaf directly under the root", roots, issue(leafTemplate("bob"), root))
	add("missing intermediate", roots, issue(leafTemplate("alice"), inter))
	add("another root", []*node{issue(caTemplate("root"), nil)}, issue(leafTemplate("alice"), inter), inter)
	noEKU := leafTemplate("erin")
	noEKU.ExtKeyUsage = nil
	add("good: leaf without extended key usage", roots, issue(noEKU, root))

	// Intermediates that may not sign.
	nonCA := caTemplate("intermediate")
	nonCA.IsCA = false
	nonCA.KeyUsage = x509.KeyUsageCertSign
	n := issue(nonCA, root)
	add("non-CA intermediate", roots, issue(leafTemplate("mallory"), n), n)
	noBC := caTemplate("intermediate")
	noBC.BasicConstraintsValid, noBC.IsCA = false, false
	n = issue(noBC, root)
	add("intermediate without basic constraints", roots, issue(leafTemplate("mallory"), n), n)
	noCertSign := caTemplate("intermediate")
	noCertSign.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	n = issue(noCertSign, root)
	add("intermediate without keyCertSign", roots, issue(leafTemplate("mallory"), n), n)
	noKU := caTemplate("intermediate")
	noKU.KeyUsage = 0
	n = issue(noKU, root)
	add("good: intermediate without key usage", roots, issue(leafTemplate("alice"), n), n)
	nonCARoot := caTemplate("root")
	nonCARoot.IsCA = false
	nr := issue(nonCARoot, nil)
	add("non-CA root signing", []*node{nr}, issue(leafTemplate("mallory"), nr))
	noCertSignRoot := caTemplate("root")
	noCertSignRoot.KeyUsage = x509.KeyUsageDigitalSignature
	nr = issue(noCertSignRoot, nil)
	add("root without keyCertSign signing", []*node{nr}, issue(leafTemplate("mallory"), nr))

	// Time.
	expired := caTemplate("intermediate")
	expired.NotBefore, expired.NotAfter = now.Add(-48*time.Hour), now.Add(-time.Hour)
	n = issue(expired, root)
	add("expired intermediate", roots, issue(leafTemplate("mallory"), n), n)
	future := leafTemplate("mallory")
	future.NotBefore = now.Add(time.Hour)
	add("not-yet-valid leaf", roots, issue(future, inter), inter)
	expiredLeaf := leafTemplate("mallory")
	expiredLeaf.NotAfter = now.Add(-time.Second)
	add("expired leaf", roots, issue(expiredLeaf, inter), inter)
	expiredRoot := caTemplate("root")
	expiredRoot.NotAfter = now.Add(-time.Minute)
	er := issue(expiredRoot, nil)
	add("expired root", []*node{er}, issue(leafTemplate("mallory"), er))
	edge := leafTemplate("alice")
	edge.NotAfter = now
	add("good: leaf valid until this very second", roots, issue(edge, inter), inter)

	// Path length.
	zero := caTemplate("root")
	zero.MaxPathLen, zero.MaxPathLenZero = 0, true
	zr := issue(zero, nil)
	zi := issue(caTemplate("intermediate"), zr)
	add("path length 0 exceeded", []*node{zr}, issue(leafTemplate("mallory"), zi), zi)
	add("good: path length 0 with no intermediate", []*node{zr}, issue(leafTemplate("alice"), zr))
	one := caTemplate("root")
	one.MaxPathLen = 1
	or := issue(one, nil)
	i1 := issue(caTemplate("intermediate-1"), or)
	i2 := issue(caTemplate("intermediate-2"), i1)
	add("path length 1 exceeded", []*node{or}, issue(leafTemplate("mallory"), i2), i2, i1)
	add("good: path length 1 with one intermediate", []*node{or}, issue(leafTemplate("alice"), i1), i1)
	interZero := caTemplate("intermediate-2")
	interZero.MaxPathLen, interZero.MaxPathLenZero = 0, true
	iz := issue(interZero, i1)
	add("path length 1 exceeded above an intermediate with path length 0", []*node{root, or}, issue(leafTemplate("alice"), iz), iz, i1)

	// Critical extensions.
	unknown := pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Critical: true, Value: []byte{0x05, 0x00}}
	crit := leafTemplate("mallory")
	crit.ExtraExtensions = []pkix.Extension{unknown}
	add("unknown critical extension on the leaf", roots, issue(crit, inter), inter)
	critCA := caTemplate("intermediate")
	critCA.ExtraExtensions = []pkix.Extension{unknown}
	n = issue(critCA, root)
	add("unknown critical extension on the intermediate", roots, issue(leafTemplate("mallory"), n), n)
	nonCrit := leafTemplate("alice")
	nonCrit.ExtraExtensions = []pkix.Extension{{Id: unknown.Id, Value: unknown.Value}}
	add("good: unknown non-critical extension", roots, issue(nonCrit, inter), inter)

	// Name constraints (Go checks the leaf's DNS, email, IP and URI names against them).
	constrained := caTemplate("intermediate")
	constrained.PermittedDNSDomainsCritical = true
	constrained.PermittedDNSDomains = []string{"example.com"}
	constrained.ExcludedIPRanges = []*net.IPNet{{IP: net.IP{198, 51, 100, 0}, Mask: net.CIDRMask(24, 32)}}
	nc := issue(constrained, root)
	outside := leafTemplate("mallory")
	outside.DNSNames = []string{"evil.test"}
	add("name constraints: DNS name outside", roots, issue(outside, nc), nc)
	excluded := leafTemplate("mallory")
	excluded.IPAddresses = []net.IP{{198, 51, 100, 7}}
	add("name constraints: excluded IP", roots, issue(excluded, nc), nc)
	inside := leafTemplate("alice")
	inside.DNSNames = []string{"a.example.com"}
	add("name constraints: DNS name inside", roots, issue(inside, nc), nc)
	add("name constraints: leaf without names", roots, issue(leafTemplate("alice"), nc), nc)

	// Extended key usage.
	server := leafTemplate("mallory")
	server.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	add("leaf EKU serverAuth only", roots, issue(server, inter), inter)
	any := leafTemplate("alice")
	any.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
	add("good: leaf EKU any", roots, issue(any, inter), inter)
	unknownEKU := leafTemplate("mallory")
	unknownEKU.ExtKeyUsage = nil
	unknownEKU.UnknownExtKeyUsage = []asn1.ObjectIdentifier{{1, 3, 6, 1, 4, 1, 99999, 2}}
	add("leaf EKU unknown only", roots, issue(unknownEKU, inter), inter)
	serverCA := caTemplate("intermediate")
	serverCA.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	n = issue(serverCA, root)
	add("intermediate EKU excludes clientAuth", roots, issue(leafTemplate("mallory"), n), n)
	clientCA := caTemplate("intermediate")
	clientCA.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}
	n = issue(clientCA, root)
	add("good: intermediate EKU includes clientAuth", roots, issue(leafTemplate("alice"), n), n)
	serverRoot := caTemplate("root")
	serverRoot.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	sr := issue(serverRoot, nil)
	add("root EKU excludes clientAuth", []*node{sr}, issue(leafTemplate("mallory"), sr))

	// Issuer names that match the CA's only after canonicalisation (case, string type): Go compares bytes.
	upper := *root.cert
	upper.RawSubject = rawName(rdn(cn(utf8Tag, "ROOT")))
	add("issuer name differs in case", roots, issue(leafTemplate("mallory"), &node{cert: &upper, key: root.key}))
	printable := *root.cert
	printable.RawSubject = rawName(rdn(cn(utf8Tag, "root"))) // Go wrote the root's CN as a PrintableString
	add("issuer name differs in string type", roots, issue(leafTemplate("mallory"), &node{cert: &printable, key: root.key}))

	// A self-signed client certificate that is itself in the bundle.
	self := leafTemplate("selfie", "ops")
	selfNode := issue(self, nil)
	add("good: the leaf is in the bundle", []*node{root, selfNode}, selfNode)

	// Signature algorithms.
	rsaRoot := issue(caTemplate("rsa-root"), nil, rsaKey())
	add("good: RSA root, SHA-256", []*node{rsaRoot}, issue(leafTemplate("alice"), rsaRoot))
	sha1 := leafTemplate("mallory")
	sha1.SignatureAlgorithm = x509.SHA1WithRSA
	if der, err := x509.CreateCertificate(rand.Reader, sha1, rsaRoot.cert, ecKey().Public(), rsaRoot.key); err == nil {
		add("SHA-1 signature", []*node{rsaRoot}, &node{pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))})
	}
	pss := leafTemplate("alice")
	pss.SignatureAlgorithm = x509.SHA256WithRSAPSS
	add("RSA-PSS signature", []*node{rsaRoot}, issue(pss, rsaRoot))

	// Other keys and names.
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	must(err)
	ed := issue(caTemplate("ed25519-intermediate"), root, edKey)
	add("good: Ed25519 intermediate", roots, issue(leafTemplate("alice"), ed), ed)
	named := leafTemplate("alice")
	named.DNSNames, named.IPAddresses, named.EmailAddresses = []string{"alice.example"}, []net.IP{{198, 51, 100, 1}}, []string{"alice@example.com"}
	add("good: leaf with DNS, IP and email names", roots, issue(named, inter), inter)
	otherName := tlv(0xa0, append(must2(asn1.Marshal(asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 3})), tlv(0xa0, tlv(utf8Tag, []byte("x")))...))
	critSAN := leafTemplate("mallory")
	critSAN.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Critical: true, Value: tlv(0x30, otherName)}}
	add("critical subjectAltName with only an otherName", roots, issue(critSAN, inter), inter)
	mixedEKU := leafTemplate("alice")
	mixedEKU.UnknownExtKeyUsage = []asn1.ObjectIdentifier{{1, 3, 6, 1, 4, 1, 99999, 2}}
	add("good: leaf EKU clientAuth and an unknown one", roots, issue(mixedEKU, inter), inter)

	// Subjects: what the user and groups are.
	subject := func(name string, raw []byte) {
		t := leafTemplate("")
		t.RawSubject = raw
		add(name, roots, issue(t, inter), inter)
	}
	subject("subject: newline in CN", rawName(rdn(cn(utf8Tag, "admin\nO=system:masters")), rdn(o(utf8Tag, "team"))))
	subject("subject: comma, plus, quotes, backslash, equals", rawName(rdn(cn(utf8Tag, `a,b+c"d\e=f<g>;h#`))))
	subject("subject: NUL in CN", rawName(rdn(cn(utf8Tag, "root\x00.evil"))))
	subject("subject: escapes in O", rawName(rdn(o(utf8Tag, "system:masters\n")), rdn(o(utf8Tag, "a,b")), rdn(cn(utf8Tag, "alice"))))
	subject("subject: multi-valued RDN", rawName(rdn(cn(utf8Tag, "alice"), o(utf8Tag, "g1")), rdn(o(utf8Tag, "g2"), o(printableTag, "g3"))))
	subject("subject: two CNs (Go takes the last)", rawName(rdn(cn(utf8Tag, "first")), rdn(cn(utf8Tag, "second"))))
	subject("subject: two CNs in one RDN", rawName(rdn(cn(utf8Tag, "first"), cn(utf8Tag, "second"))))
	subject("subject: several Os and an empty one", rawName(rdn(o(utf8Tag, "b")), rdn(o(utf8Tag, "a")), rdn(o(utf8Tag, "")), rdn(o(utf8Tag, "b")), rdn(cn(utf8Tag, "x"))))
	subject("subject: no CN", rawName(rdn(o(utf8Tag, "system:masters"))))
	subject("subject: empty CN", rawName(rdn(cn(utf8Tag, "")), rdn(o(utf8Tag, "system:masters"))))
	subject("subject: empty RDN", rawName(rdn(), rdn(cn(utf8Tag, "alice"))))
	subject("subject: second CN an OCTET STRING", rawName(rdn(cn(utf8Tag, "node-a")), rdn(cn(octetTag, "node-b"))))
	subject("subject: CN an INTEGER", rawName(rdn(cn(integerTag, "\x01"))))
	subject("subject: CN a VisibleString", rawName(rdn(cn(visibleTag, "alice"))))
	subject("subject: O an OCTET STRING", rawName(rdn(cn(utf8Tag, "alice")), rdn(o(octetTag, "system:masters"))))
	subject("subject: T61String ASCII", rawName(rdn(cn(t61Tag, "cafe"))))
	subject("subject: T61String Latin-1", rawName(rdn(cn(t61Tag, "caf\xe9"))))
	subject("subject: BMPString", rawName(rdn(cn(bmpTag, "\x00b\x00m\x00p"))))
	subject("subject: BMPString ending in NUL", rawName(rdn(cn(bmpTag, "\x00b\x00m\x00p\x00\x00"))))
	subject("subject: BMPString surrogate", rawName(rdn(cn(bmpTag, "\xd8\x00\x00a"))))
	subject("subject: BMPString odd length", rawName(rdn(cn(bmpTag, "\x00b\x00"))))
	subject("subject: PrintableString with * and &", rawName(rdn(cn(printableTag, "a*b&c"))))
	subject("subject: PrintableString with @", rawName(rdn(cn(printableTag, "a@b"))))
	subject("subject: IA5String", rawName(rdn(cn(ia5Tag, "alice@example"))))
	subject("subject: IA5String with a high byte", rawName(rdn(cn(ia5Tag, "al\x80ce"))))
	subject("subject: NumericString", rawName(rdn(cn(numericTag, "12 34"))))
	subject("subject: NumericString with a letter", rawName(rdn(cn(numericTag, "12a"))))
	subject("subject: UTF8String with a BOM", rawName(rdn(cn(utf8Tag, "\ufeffadmin"))))
	subject("subject: invalid UTF-8", rawName(rdn(cn(utf8Tag, "adm\xffin"))))
	subject("subject: UTF-8 surrogate", rawName(rdn(cn(utf8Tag, "\xed\xa0\x80"))))
	subject("subject: non-ASCII UTF-8", rawName(rdn(cn(utf8Tag, "zoë")), rdn(o(utf8Tag, "équipe"))))

	return cases
}


func must2(b []byte, err error) []byte {
	must(err)
	return b
}
