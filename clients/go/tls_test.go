package memoryd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	memoryd "github.com/memoryd/memoryd/clients/go"
)

// A daemon serving TLS (the test certificate of tests/conformance/tls): a client trusting
// the test CA gets answers; a plaintext client gets none.
func TestTLS(t *testing.T) {
	dir, err := filepath.Abs("../../tests/conformance/tls")
	if err != nil {
		t.Fatal(err)
	}
	const token = "tls-token-for-the-tests"
	address := startDaemon(t, token, false,
		"MEMORYD_SERVER__TLS_CERT="+filepath.Join(dir, "server.crt"),
		"MEMORYD_SERVER__TLS_KEY="+filepath.Join(dir, "server.key"))
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("ca.crt holds no certificate")
	}
	ctx := context.Background()

	secure, err := memoryd.New(memoryd.Config{Address: address, Token: token, TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	stats, err := secure.Stats(ctx, "tls")
	if err != nil {
		t.Fatalf("Stats over TLS: %v", err)
	}
	if stats.EmbeddingDim != 384 {
		t.Fatalf("Stats over TLS: embedding_dim %d", stats.EmbeddingDim)
	}

	plain, err := memoryd.New(memoryd.Config{Address: address, Token: token, Retries: -1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Stats(ctx, "tls"); err == nil {
		t.Fatal("a plaintext client got an answer from a TLS daemon")
	}
}
