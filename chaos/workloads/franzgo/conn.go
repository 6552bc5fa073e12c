package main

// The Kafka connection from TXNLAB_KAFKA_* variables (cluster/access/connection.py names them) as franz-go options,
// and the topic facts a workload reads once at its start.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const listTimeout = 30 * time.Second // chaos/workloads/topics.py LIST_TIMEOUT_S

func env(name string) string { return os.Getenv("TXNLAB_KAFKA_" + name) }

// connectionOpts are the client options every workload client of the process starts from: its client.id is
// TXNLAB_KAFKA_CLIENT_ID when the connection names one, else the process's name on the wire, `<run tag>.<process>`
// (as the reference's: a hold-requests fault's `clients` pattern selects one process).
func connectionOpts(c *Ctx) ([]kgo.Opt, error) {
	bootstrap := env("BOOTSTRAP")
	if bootstrap == "" {
		return nil, errors.New("TXNLAB_KAFKA_BOOTSTRAP is not set")
	}
	clientID := env("CLIENT_ID")
	if clientID == "" && c.RunTag != "" {
		clientID = c.RunTag + "." + c.Process
	}
	if clientID == "" {
		clientID = "txnlab"
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ClientID(clientID),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel(), func() string { return time.Now().UTC().Format("15:04:05.000 ") }))}
	protocol := env("SECURITY_PROTOCOL")
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	if protocol == "SSL" || protocol == "SASL_SSL" {
		config, err := tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(config))
	}
	if protocol == "SASL_PLAINTEXT" || protocol == "SASL_SSL" {
		mechanism, err := saslOpt()
		if err != nil {
			return nil, err
		}
		opts = append(opts, mechanism)
	} else if protocol != "PLAINTEXT" && protocol != "SSL" {
		return nil, fmt.Errorf("TXNLAB_KAFKA_SECURITY_PROTOCOL %q: one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", protocol)
	}
	return opts, nil
}

func tlsConfig() (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := env("TLS_CA_FILE"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("TXNLAB_KAFKA_TLS_CA_FILE: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("TXNLAB_KAFKA_TLS_CA_FILE holds no PEM certificate")
		}
	}
	if cert, key := env("TLS_CERT_FILE"), env("TLS_KEY_FILE"); cert != "" || key != "" {
		if env("TLS_KEY_PASSWORD") != "" {
			return nil, errors.New("an encrypted TLS key (TXNLAB_KAFKA_TLS_KEY_PASSWORD) is not supported by the franz-go workloads: give an unencrypted key file")
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("TXNLAB_KAFKA_TLS_CERT_FILE / TLS_KEY_FILE: %w", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	if strings.EqualFold(env("TLS_VERIFY_HOSTNAME"), "false") {
		// Verify the chain against the CA, not the name (cluster/access/connection.py tls_verify_hostname=false).
		config.InsecureSkipVerify = true
		config.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, len(raw))
			for i, b := range raw {
				c, err := x509.ParseCertificate(b)
				if err != nil {
					return err
				}
				certs[i] = c
			}
			intermediates := x509.NewCertPool()
			for _, c := range certs[1:] {
				intermediates.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: config.RootCAs, Intermediates: intermediates})
			return err
		}
	}
	return config, nil
}

func saslOpt() (kgo.Opt, error) {
	user, password := env("SASL_USERNAME"), env("SASL_PASSWORD")
	if password == "" && env("SASL_PASSWORD_FILE") != "" {
		b, err := os.ReadFile(env("SASL_PASSWORD_FILE"))
		if err != nil {
			return nil, fmt.Errorf("TXNLAB_KAFKA_SASL_PASSWORD_FILE: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	switch env("SASL_MECHANISM") {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism()), nil
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()), nil
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()), nil
	}
	return nil, fmt.Errorf("TXNLAB_KAFKA_SASL_MECHANISM %q: one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", env("SASL_MECHANISM"))
}

// logLevel: franz-go's own log, into the process's log; warnings unless TXNLAB_CLIENT_LOG says
// error, warn, info or debug.
func logLevel() kgo.LogLevel {
	switch strings.ToLower(os.Getenv("TXNLAB_CLIENT_LOG")) {
	case "error":
		return kgo.LogLevelError
	case "info":
		return kgo.LogLevelInfo
	case "debug":
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

// partitionCounts reads the topics' partition counts once (Metadata); a missing topic is an error.
func partitionCounts(c *Ctx, topics []string) map[string]int {
	opts, err := connectionOpts(c)
	if err != nil {
		logf("%v", err)
		os.Exit(2)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		logf("client: %v", err)
		os.Exit(1)
	}
	defer cl.Close()
	counts := map[string]int{}
	var failure error
	c.Bounded("list_topics", listTimeout, func(ctx context.Context) {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			failure = err
			return
		}
		for _, t := range resp.Topics {
			if t.Topic != nil && kerr.ErrorForCode(t.ErrorCode) == nil {
				counts[*t.Topic] = len(t.Partitions)
			}
		}
	})
	var missing []string
	for _, t := range topics {
		if counts[t] == 0 {
			missing = append(missing, t)
		}
	}
	if failure != nil || len(missing) > 0 {
		logf("topics %v do not exist or could not be read (create them first, e.g. `txnlab chaos workload` does): %v", missing, failure)
		os.Exit(1)
	}
	return counts
}
