package main

// The connection's security, from the environment, so the same checks run over
// any listener of a broker:
//
//	STRAND_SECURITY_PROTOCOL  PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
//	STRAND_SSL_CA             PEM file of the CA the broker's certificate comes from
//	STRAND_SSL_CERT, STRAND_SSL_KEY
//	                          the client's certificate and (unencrypted) key, for
//	                          listeners that require one
//	STRAND_SASL_MECHANISM     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//	STRAND_SASL_USER, STRAND_SASL_PASSWORD

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func securityOpts() []kgo.Opt {
	protocol := strings.ToUpper(os.Getenv("STRAND_SECURITY_PROTOCOL"))
	var opts []kgo.Opt
	if strings.Contains(protocol, "SSL") {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig()))
	}
	if strings.HasPrefix(protocol, "SASL") {
		opts = append(opts, kgo.SASL(saslMechanism()))
	}
	return opts
}

func tlsConfig() *tls.Config {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := os.Getenv("STRAND_SSL_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			fail("reading STRAND_SSL_CA: %v", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fail("STRAND_SSL_CA %s holds no certificate", ca)
		}
		config.RootCAs = roots
	}
	if cert := os.Getenv("STRAND_SSL_CERT"); cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, os.Getenv("STRAND_SSL_KEY"))
		if err != nil {
			fail("loading the client certificate: %v", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config
}

func saslMechanism() sasl.Mechanism {
	user, password := os.Getenv("STRAND_SASL_USER"), os.Getenv("STRAND_SASL_PASSWORD")
	switch mechanism := strings.ToUpper(os.Getenv("STRAND_SASL_MECHANISM")); mechanism {
	case "", "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	default:
		fail("STRAND_SASL_MECHANISM %s is not one this driver speaks", mechanism)
		return nil
	}
}
