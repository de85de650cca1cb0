package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Without an auth file the server refuses any address but loopback, and says why.
func TestServeRefusesPublicAddressWithoutAuth(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "serve", "--listen", "0.0.0.0:0", "--store", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "without --auth-file") {
		t.Fatalf("baton serve on 0.0.0.0 without auth: %v\n%s", err, out)
	}
}

// With --tls-cert and --tls-key the API is served over TLS.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)

	addr := freeAddr(t)
	cmd := exec.Command(binary, "serve", "--listen", addr, "--store", "sqlite://"+filepath.Join(dir, "b.db"),
		"--tls-cert", certFile, "--tls-key", keyFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: hangGuard}
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := c.Get("https://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 && resp.TLS != nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TLS answer from baton serve after %s: %v", hangGuard, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the health endpoint is the signal
	}
}
