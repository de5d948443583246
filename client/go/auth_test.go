package frontdesk_test

// API keys and TLS against the in-process fake of retry_test.go, behind server interceptors that
// check "authorization" as frontdesk-server's auth layer does (no live server needed); mutual TLS
// with the certificates of client/testdata/tls.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	frontdesk "github.com/frontdesk/frontdesk/client/go"
	v1 "github.com/frontdesk/frontdesk/client/go/frontdeskv1"
)

const (
	secret = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde"
	apiKey = "fdk_0123456789abcdef_" + secret
	// narrowKey's scopes lack conversation:write.
	narrowKey = "fdk_fedcba9876543210_narrowNarrowNarrowNarrowNarrowNarrowNarrow12"
	// busyKey's tenant is over its request quota.
	busyKey = "fdk_00000000000000ff_busyBusyBusyBusyBusyBusyBusyBusyBusyBusyBusy1"
)

// gate records every call's method and authorization header ("" for none) and refuses as the
// auth layer would.
type gate struct {
	mu   sync.Mutex
	seen [][2]string
}

func refusal(code codes.Code, reason string, md map[string]string, delay time.Duration) error {
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: "frontdesk.dev", Metadata: md}}
	if delay > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	}
	st, err := status.New(code, "refused: "+reason).WithDetails(details...)
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (g *gate) admit(ctx context.Context, method string) error {
	header := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		header = md.Get("authorization")[0]
	}
	g.mu.Lock()
	g.seen = append(g.seen, [2]string{method[strings.LastIndex(method, "/")+1:], header})
	g.mu.Unlock()
	switch header {
	case "Bearer " + apiKey:
		return nil
	case "Bearer " + narrowKey:
		return refusal(codes.PermissionDenied, frontdesk.ReasonScopeMissing, map[string]string{"scope": "conversation:write"}, 0)
	case "Bearer " + busyKey:
		return refusal(codes.ResourceExhausted, frontdesk.ReasonQuotaExceeded, map[string]string{"quota": "requests_per_sec"}, 1500*time.Millisecond)
	default:
		return refusal(codes.Unauthenticated, frontdesk.ReasonUnauthenticated, nil, 0)
	}
}

func (g *gate) methods() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, s := range g.seen {
		out = append(out, s[0])
	}
	return out
}

func (g *gate) headers() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, s := range g.seen {
		out = append(out, s[1])
	}
	return out
}

func tlsFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "tls", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveGated serves f behind a gate, over mutual TLS when withTLS, and returns the address.
func serveGated(t *testing.T, f *fake, withTLS bool) (*gate, string) {
	t.Helper()
	g := &gate{}
	opts := []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := g.admit(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := g.admit(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
	if withTLS {
		cert, err := tls.X509KeyPair(tlsFixture(t, "server.pem"), tlsFixture(t, "server.key"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(tlsFixture(t, "ca.pem"))
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		})))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	v1.RegisterConversationServiceServer(srv, f)
	v1.RegisterWorkflowServiceServer(srv, f)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return g, lis.Addr().String()
}

func connect(t *testing.T, addr string, o frontdesk.Options) (*frontdesk.Client, context.Context) {
	t.Helper()
	c, err := frontdesk.Connect(addr, o)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = fastPolicy
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

func TestAPIKeySentWithEveryCall(t *testing.T) {
	f := &fake{startFailures: 1, delay: 10 * time.Millisecond, breakAfter: 3}
	g, addr := serveGated(t, f, false)
	c, ctx := connect(t, addr, frontdesk.Options{APIKey: apiKey})
	if _, err := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1")); err != nil {
		t.Fatal(err)
	}
	ids, _, err := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k2")))
	if err != nil || !reflect.DeepEqual(ids, allIDs) {
		t.Fatalf("got %v, %v", ids, err)
	}
	sub := c.SubscribeRun(ctx, fakeRun, 4)
	for range sub.Events() {
	}
	if sub.Err() != nil {
		t.Fatal(sub.Err())
	}
	want := []string{
		"StartConversation", "StartConversation", // retried after ABORTED
		"SendMessage", "SubscribeRun", // re-attached after the stream broke
		"SendMessage", // the call again, for its recorded result
		"SubscribeRun",
	}
	if !reflect.DeepEqual(g.methods(), want) {
		t.Fatalf("methods %v", g.methods())
	}
	for _, h := range g.headers() {
		if h != "Bearer "+apiKey {
			t.Fatalf("headers %q", g.headers())
		}
	}

	// WithAPIKey for a client dialled with options of one's own.
	g.seen = nil
	d, err := frontdesk.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), frontdesk.WithAPIKey(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.StartConversation(ctx, "intake"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.headers(), []string{"Bearer " + apiKey}) {
		t.Fatalf("headers %q", g.headers())
	}
}

func TestRefusalsAreDecodedAndNotRetried(t *testing.T) {
	cases := []struct {
		key    string
		code   codes.Code
		reason string
	}{
		{"", codes.Unauthenticated, frontdesk.ReasonUnauthenticated},
		{narrowKey, codes.PermissionDenied, frontdesk.ReasonScopeMissing},
		{busyKey, codes.ResourceExhausted, frontdesk.ReasonQuotaExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			g, addr := serveGated(t, &fake{}, false)
			c, ctx := connect(t, addr, frontdesk.Options{APIKey: tc.key})
			_, unary := c.StartConversation(ctx, "intake", frontdesk.WithStartIdempotencyKey("k1"))
			_, _, streamed := collectTurn(t, c.SendMessage(ctx, "c1", "hi", frontdesk.WithIdempotencyKey("k2")))
			for _, err := range []error{unary, streamed} {
				fe, ok := frontdesk.AsError(err)
				if !ok || fe.Code != tc.code || fe.Reason != tc.reason || fe.Retryable() {
					t.Fatalf("got %v", err)
				}
				if strings.Contains(fe.Error(), secret) || strings.Contains(fe.Error(), "busyBusy") {
					t.Fatalf("the error shows the key: %v", fe)
				}
			}
			if !reflect.DeepEqual(g.methods(), []string{"StartConversation", "SendMessage"}) {
				t.Fatalf("refusals are final, got %v", g.methods())
			}
			fe, _ := frontdesk.AsError(unary)
			switch tc.reason {
			case frontdesk.ReasonScopeMissing:
				if fe.Metadata["scope"] != "conversation:write" {
					t.Fatalf("metadata %v", fe.Metadata)
				}
			case frontdesk.ReasonQuotaExceeded:
				delay, ok := fe.RetryInfo()
				if fe.Metadata["quota"] != "requests_per_sec" || !ok || delay != 1500*time.Millisecond {
					t.Fatalf("metadata %v, retry info %v %v", fe.Metadata, delay, ok)
				}
				if !strings.Contains(fe.Error(), "retry after 1.5s") {
					t.Fatal(fe.Error())
				}
			}
		})
	}
	if frontdesk.ReasonQuotaExceeded != v1.ErrorReason_ERROR_REASON_QUOTA_EXCEEDED.String()[len("ERROR_REASON_"):] ||
		frontdesk.ReasonScopeMissing != v1.ErrorReason_ERROR_REASON_SCOPE_MISSING.String()[len("ERROR_REASON_"):] ||
		frontdesk.ReasonUnauthenticated != v1.ErrorReason_ERROR_REASON_UNAUTHENTICATED.String()[len("ERROR_REASON_"):] {
		t.Fatal("the reason constants differ from the ErrorReason names")
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	o := frontdesk.Options{
		APIKey: apiKey,
		TLS: &frontdesk.TLSConfig{
			CACertPEM: tlsFixture(t, "ca.pem"), ClientCertPEM: tlsFixture(t, "client.pem"), ClientKeyPEM: tlsFixture(t, "client.key"),
		},
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("connecting", "options", o, "tls", o.TLS)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("connecting", "options", o)
	encoded, err := json.Marshal(struct{ Options frontdesk.Options }{o})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		fmt.Sprintf("%v", o), fmt.Sprintf("%+v", o), fmt.Sprintf("%#v", o), fmt.Sprintf("%s", o),
		fmt.Sprintf("%v", &o), fmt.Sprintf("%+v", *o.TLS), fmt.Sprint(o.TLS), logged.String(), string(encoded),
		fmt.Sprintf("%#v", []frontdesk.Options{o}),
	}
	for _, text := range texts {
		if strings.Contains(text, secret) || strings.Contains(text, "PRIVATE KEY") {
			t.Fatalf("printed the secret: %s", text)
		}
	}
	if !strings.Contains(texts[0], "APIKey: <redacted>") || !strings.Contains(texts[5], "ClientKeyPEM: <redacted>") {
		t.Fatalf("%s\n%s", texts[0], texts[5])
	}

	if _, err := frontdesk.Connect("127.0.0.1:1", frontdesk.Options{APIKey: secret + "\n" + secret}); err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("want an error without the key, got %v", err)
	}
	if _, err := frontdesk.Connect("127.0.0.1:1", frontdesk.Options{TLS: &frontdesk.TLSConfig{ClientCertPEM: []byte("x")}}); err == nil {
		t.Fatal("a client certificate without its key is an error")
	}
	if _, err := frontdesk.Connect("127.0.0.1:1", frontdesk.Options{TLS: &frontdesk.TLSConfig{CACertPEM: []byte("x")}}); err == nil {
		t.Fatal("a CA that is not PEM is an error")
	}
}

func TestMutualTLS(t *testing.T) {
	g, addr := serveGated(t, &fake{}, true)
	_, port, _ := net.SplitHostPort(addr)
	full := frontdesk.TLSConfig{
		CACertPEM: tlsFixture(t, "ca.pem"), ClientCertPEM: tlsFixture(t, "client.pem"), ClientKeyPEM: tlsFixture(t, "client.key"),
	}
	byIP := full
	byIP.ServerName = "localhost"
	for _, target := range []struct {
		addr string
		tls  frontdesk.TLSConfig
	}{{"localhost:" + port, full}, {addr, full}, {addr, byIP}} {
		c, ctx := connect(t, target.addr, frontdesk.Options{APIKey: apiKey, TLS: &target.tls})
		if _, err := c.StartConversation(ctx, "intake"); err != nil {
			t.Fatalf("%s: %v", target.addr, err)
		}
	}
	if !reflect.DeepEqual(g.headers(), []string{"Bearer " + apiKey, "Bearer " + apiKey, "Bearer " + apiKey}) {
		t.Fatalf("headers %q", g.headers())
	}

	// The server requires a client certificate; and the client must trust the server's CA.
	for _, cfg := range []frontdesk.TLSConfig{{CACertPEM: full.CACertPEM}, {}} {
		c, ctx := connect(t, "localhost:"+port, frontdesk.Options{APIKey: apiKey, TLS: &cfg})
		c.Retry = nil
		if _, err := c.StartConversation(ctx, "intake"); status.Code(err) != codes.Unavailable {
			t.Fatalf("want UNAVAILABLE, got %v", err)
		}
	}
	if len(g.headers()) != 3 {
		t.Fatalf("a refused handshake reached a service: %v", g.methods())
	}
}

// TestLiveMutualTLS needs FRONTDESK_TLS_ADDR (host:port, such as localhost:PORT): a running
// frontdesk-server serving TLS with the certificates of client/testdata/tls and requiring client
// certificates (scripts/sdk-tests.sh starts one); FRONTDESK_KEY, when set, is sent as the key.
func TestLiveMutualTLS(t *testing.T) {
	addr := os.Getenv("FRONTDESK_TLS_ADDR")
	if addr == "" {
		t.Skip("FRONTDESK_TLS_ADDR not set: no live TLS frontdesk-server to test against")
	}
	full := frontdesk.TLSConfig{
		CACertPEM: tlsFixture(t, "ca.pem"), ClientCertPEM: tlsFixture(t, "client.pem"), ClientKeyPEM: tlsFixture(t, "client.key"),
	}
	c, ctx := connect(t, addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY"), TLS: &full})
	workflows, err := c.ListWorkflows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range workflows {
		found = found || w.GetName() == "intake"
	}
	started, err := c.StartConversation(ctx, "intake")
	if !found || err != nil || started.GetConversation().GetConversationId() == "" {
		t.Fatalf("workflows %v, start %v", workflows, err)
	}
	noCert, ctx := connect(t, addr, frontdesk.Options{APIKey: os.Getenv("FRONTDESK_KEY"), TLS: &frontdesk.TLSConfig{CACertPEM: full.CACertPEM}})
	if _, err := noCert.ListWorkflows(ctx); status.Code(err) != codes.Unavailable {
		t.Fatalf("want UNAVAILABLE without a client certificate, got %v", err)
	}
}
