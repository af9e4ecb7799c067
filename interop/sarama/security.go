package main

// The connection's security, from the environment, so the same checks run over any
// listener of a broker (as interop/go/security.go does for franz-go):
//
//	STRAND_SECURITY_PROTOCOL  PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
//	STRAND_SSL_CA             PEM file of the CA the broker's certificate comes from
//	STRAND_SSL_CERT, STRAND_SSL_KEY
//	                          the client's certificate and (unencrypted) key
//	STRAND_SASL_MECHANISM     PLAIN (the only one Sarama speaks without a SCRAM library)
//	STRAND_SASL_USER, STRAND_SASL_PASSWORD
//	STRAND_SASL_HANDSHAKE     1 (default, SaslAuthenticate) or 0 (bare tokens after
//	                          SaslHandshake v0, Sarama's older framing)

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
)

func applySecurity(c *sarama.Config) error {
	protocol := strings.ToUpper(os.Getenv("STRAND_SECURITY_PROTOCOL"))
	if strings.Contains(protocol, "SSL") {
		config := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca := os.Getenv("STRAND_SSL_CA"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return fmt.Errorf("reading STRAND_SSL_CA: %w", err)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return fmt.Errorf("STRAND_SSL_CA %s holds no certificate", ca)
			}
			config.RootCAs = roots
		}
		if cert := os.Getenv("STRAND_SSL_CERT"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, os.Getenv("STRAND_SSL_KEY"))
			if err != nil {
				return fmt.Errorf("loading the client certificate: %w", err)
			}
			config.Certificates = []tls.Certificate{pair}
		}
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = config
	}
	if strings.HasPrefix(protocol, "SASL") {
		if mechanism := os.Getenv("STRAND_SASL_MECHANISM"); mechanism != "" && !strings.EqualFold(mechanism, "PLAIN") {
			return fmt.Errorf("STRAND_SASL_MECHANISM %s: this driver speaks PLAIN only", mechanism)
		}
		c.Net.SASL.Enable = true
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		c.Net.SASL.User = os.Getenv("STRAND_SASL_USER")
		c.Net.SASL.Password = os.Getenv("STRAND_SASL_PASSWORD")
		c.Net.SASL.Version = sarama.SASLHandshakeV1
		if os.Getenv("STRAND_SASL_HANDSHAKE") == "0" {
			// The older framing predates ApiVersions before authentication: Sarama
			// requires it off (it then speaks by its configured Kafka version).
			c.Net.SASL.Version = sarama.SASLHandshakeV0
			c.ApiVersionsRequest = false
		}
	}
	return nil
}
