package frontdesk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// The Error.Reason values of the refusals of a server that requires API keys.
const (
	// ReasonUnauthenticated: no API key, or one that is unknown, malformed or revoked
	// (codes.Unauthenticated).
	ReasonUnauthenticated = "UNAUTHENTICATED"
	// ReasonScopeMissing: the key lacks the scope the method needs (codes.PermissionDenied);
	// Error.Metadata["scope"] names it, such as "triage:write".
	ReasonScopeMissing = "SCOPE_MISSING"
	// ReasonQuotaExceeded: the tenant is over a quota (codes.ResourceExhausted), with
	// Error.RetryInfo saying when to try again; Error.Metadata["quota"] names the quota
	// ("requests_per_sec" or "max_concurrent_runs"). The client does not retry it.
	ReasonQuotaExceeded = "QUOTA_EXCEEDED"
)

// Options configures Connect: an API key, TLS, and further dial options. Printing it (fmt, slog,
// encoding/json) never shows the key or the TLS private key.
type Options struct {
	// APIKey (from `frontdesk-server keys create`) is sent as "authorization: Bearer <key>"
	// with every call, retries and re-attaching streams included. Empty: no key.
	APIKey string
	// TLS connects over TLS; nil connects in plaintext.
	TLS *TLSConfig
	// DialOptions are further grpc dial options, applied after those above.
	DialOptions []grpc.DialOption
}

// TLSConfig says how Connect verifies the server and, for mutual TLS, which certificate it
// presents. Printing it never shows the private key.
type TLSConfig struct {
	// CACertPEM is the CA certificate(s) that signed the server's certificate; nil trusts the
	// system's roots.
	CACertPEM []byte
	// ClientCertPEM and ClientKeyPEM are a client certificate and its private key, for mutual
	// TLS (both or neither).
	ClientCertPEM []byte
	ClientKeyPEM  []byte
	// ServerName is the name to verify the server's certificate against when it differs from
	// the target's host (such as connecting by IP address to a certificate that names a host).
	ServerName string
}

// Config returns the crypto/tls configuration (TLS 1.2 at least).
func (t TLSConfig) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if len(t.CACertPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.CACertPEM) {
			return nil, errors.New("frontdesk: TLSConfig.CACertPEM holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if (len(t.ClientCertPEM) == 0) != (len(t.ClientKeyPEM) == 0) {
		return nil, errors.New("frontdesk: TLSConfig.ClientCertPEM and ClientKeyPEM go together (mutual TLS)")
	}
	if len(t.ClientCertPEM) > 0 {
		cert, err := tls.X509KeyPair(t.ClientCertPEM, t.ClientKeyPEM)
		if err != nil {
			// The error names what is wrong with the pair, never the key's bytes.
			return nil, fmt.Errorf("frontdesk: TLSConfig client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Connect creates a client for target (host:port) with an API key and TLS as o says. The
// connection is made lazily, on the first call.
func Connect(target string, o Options) (*Client, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if o.TLS != nil {
		cfg, err := o.TLS.Config()
		if err != nil {
			return nil, err
		}
		opts[0] = grpc.WithTransportCredentials(credentials.NewTLS(cfg))
	}
	if o.APIKey != "" {
		key, err := newAPIKey(o.APIKey)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(key))
	}
	return Dial(target, append(opts, o.DialOptions...)...)
}

// WithAPIKey is the dial option that sends key as "authorization: Bearer <key>" with every
// call, for Dial or grpc.NewClient (Connect does it with Options.APIKey). It also works over
// plaintext connections. A key that is not visible ASCII makes every call fail.
func WithAPIKey(key string) grpc.DialOption {
	creds, err := newAPIKey(key)
	if err != nil {
		return grpc.WithPerRPCCredentials(invalidAPIKey{})
	}
	return grpc.WithPerRPCCredentials(creds)
}

var errInvalidAPIKey = errors.New("frontdesk: the API key must be non-empty visible ASCII (a key from `frontdesk-server keys create`)")

// apiKey is the PerRPCCredentials of an API key. It prints as redacted.
type apiKey struct{ header string }

func newAPIKey(key string) (apiKey, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return apiKey{}, errInvalidAPIKey
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] > '~' {
			return apiKey{}, errInvalidAPIKey
		}
	}
	return apiKey{header: "Bearer " + key}, nil
}

func (k apiKey) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": k.header}, nil
}

// RequireTransportSecurity is false: keys also go over plaintext (loopback, or a proxy that
// terminates TLS); Options.TLS is the caller's choice.
func (apiKey) RequireTransportSecurity() bool { return false }

func (apiKey) Format(f fmt.State, _ rune) { fmt.Fprint(f, "apiKey(<redacted>)") }

type invalidAPIKey struct{}

func (invalidAPIKey) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return nil, errInvalidAPIKey
}

func (invalidAPIKey) RequireTransportSecurity() bool { return false }

func redacted(set bool) string {
	if set {
		return "<redacted>"
	}
	return "none"
}

func (o Options) describe() string {
	t := "none"
	if o.TLS != nil {
		t = o.TLS.describe()
	}
	return fmt.Sprintf("frontdesk.Options{APIKey: %s, TLS: %s, DialOptions: %d}", redacted(o.APIKey != ""), t, len(o.DialOptions))
}

func (t TLSConfig) describe() string {
	return fmt.Sprintf("frontdesk.TLSConfig{CACertPEM: %d bytes, ClientCertPEM: %d bytes, ClientKeyPEM: %s, ServerName: %q}",
		len(t.CACertPEM), len(t.ClientCertPEM), redacted(len(t.ClientKeyPEM) > 0), t.ServerName)
}

// Format prints o for every verb (%v, %+v, %#v, %s) without the key.
func (o Options) Format(f fmt.State, _ rune) { fmt.Fprint(f, o.describe()) }

// LogValue logs o with slog without the key.
func (o Options) LogValue() slog.Value { return slog.StringValue(o.describe()) }

// MarshalJSON encodes o as its description, without the key.
func (o Options) MarshalJSON() ([]byte, error) { return json.Marshal(o.describe()) }

// Format prints t for every verb without the private key.
func (t TLSConfig) Format(f fmt.State, _ rune) { fmt.Fprint(f, t.describe()) }

// LogValue logs t with slog without the private key.
func (t TLSConfig) LogValue() slog.Value { return slog.StringValue(t.describe()) }

// MarshalJSON encodes t as its description, without the private key.
func (t TLSConfig) MarshalJSON() ([]byte, error) { return json.Marshal(t.describe()) }
