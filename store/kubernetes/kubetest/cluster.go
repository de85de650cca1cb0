// Package kubetest runs a real kube-apiserver and its etcd, as processes on free loopback
// ports, for the tests of store/kubernetes and the benchmarks in bench/peers. The binaries are
// built once from the recipes in store/kubernetes/testenv by scripts/k8s-testenv.sh, which
// prints the folder holding them; tests find it in BATON_K8S_ASSETS.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// Users of the token file. Admin is in system:masters; Limited has no rights until a
// RoleBinding grants some (the RBAC tests bind it to the documented Role).
const (
	AdminToken   = "baton-admin-token"
	LimitedToken = "baton-limited-token"
	LimitedUser  = "baton-limited"
)

// EnvAssets names the folder holding the kube-apiserver and etcd binaries.
const EnvAssets = "BATON_K8S_ASSETS"

// Cluster is one etcd and one kube-apiserver, with their data under Dir.
type Cluster struct {
	Dir                        string
	assets                     string
	etcdClient, etcdPeer, port int
	etcd, api                  *exec.Cmd
	exited                     map[*exec.Cmd]chan struct{}
}

// Start prepares dir (keys, token file) and starts both servers on free ports, waiting until
// the API server is ready.
func Start(assets, dir string) (*Cluster, error) {
	c := &Cluster{Dir: dir, assets: assets, exited: map[*exec.Cmd]chan struct{}{}}
	for _, p := range []*int{&c.etcdClient, &c.etcdPeer, &c.port} {
		var err error
		if *p, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := c.prepare(); err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// prepare writes the service-account key pair and the token file.
func (c *Cluster) prepare() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(AdminToken + ",admin,1,system:masters\n" + LimitedToken + "," + LimitedUser + ",2\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.Dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) start() error {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", c.etcdClient)
	c.etcd = c.launch("etcd", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", c.etcdPeer),
		"--unsafe-no-fsync", "--log-level", "warn")
	if err := c.etcd.Start(); err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	c.watchExit(c.etcd)
	if err := c.waitHTTP(c.etcd, etcdURL+"/health", nil); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	c.api = c.launch("kube-apiserver", "--etcd-servers", etcdURL,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(c.Dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(c.Dir, "sa.key"),
		"--cert-dir", filepath.Join(c.Dir, "certs"), "--secure-port", fmt.Sprint(c.port),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--endpoint-reconciler-type", "none", "--authorization-mode", "RBAC",
		"--token-auth-file", filepath.Join(c.Dir, "tokens.csv"),
		"--service-cluster-ip-range", "10.0.0.0/24")
	if err := c.api.Start(); err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	c.watchExit(c.api)
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // readiness only
	if err := c.waitHTTP(c.api, c.Host()+"/readyz", tr); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	return nil
}

// launch prepares a server process whose output goes to DIR/<name>.log and which dies with the
// test process.
func (c *Cluster) launch(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.assets, name), args...)
	if f, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		cmd.Stdout, cmd.Stderr = f, f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (c *Cluster) watchExit(cmd *exec.Cmd) {
	ch := make(chan struct{})
	c.exited[cmd] = ch
	go func() {
		_ = cmd.Wait()
		if f, ok := cmd.Stdout.(*os.File); ok {
			f.Close()
		}
		close(ch)
	}()
}

// waitHTTP polls url until it answers 200, or fails when the process exits or after two
// minutes (a server that neither starts nor dies).
func (c *Cluster) waitHTTP(cmd *exec.Cmd, url string, tr *http.Transport) error {
	client := &http.Client{Timeout: 5 * time.Second}
	if tr != nil {
		client.Transport = tr
		defer tr.CloseIdleConnections()
	}
	giveUp := time.After(2 * time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+AdminToken)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited[cmd]:
			return fmt.Errorf("exited before ready; log:\n%s", c.logTail(filepath.Base(cmd.Path)))
		case <-giveUp:
			return fmt.Errorf("not ready after 2 minutes; log:\n%s", c.logTail(filepath.Base(cmd.Path)))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, name+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// Stop kills both servers and waits for them to exit. Their data stays in Dir.
func (c *Cluster) Stop() {
	for _, cmd := range []*exec.Cmd{c.api, c.etcd} {
		if cmd == nil || cmd.Process == nil {
			continue
		}
		_ = cmd.Process.Kill()
		if ch, ok := c.exited[cmd]; ok {
			<-ch
		}
	}
	c.api, c.etcd = nil, nil
}

// Restart stops both servers and starts them again on the same data and ports.
func (c *Cluster) Restart() error {
	c.Stop()
	return c.start()
}

// Host is the API server's URL.
func (c *Cluster) Host() string { return fmt.Sprintf("https://127.0.0.1:%d", c.port) }

// Config is a client configuration authenticating with token, trusting the API server's
// self-signed certificate.
func (c *Cluster) Config(token string) *rest.Config {
	return &rest.Config{Host: c.Host(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(c.Dir, "certs", "apiserver.crt")}}
}

// ErrNoAssets is returned by Assets when the binaries are not there.
var ErrNoAssets = errors.New("kubetest: " + EnvAssets + " does not name a folder with kube-apiserver and etcd (run scripts/k8s-testenv.sh)")

// Assets returns the folder of the binaries from EnvAssets.
func Assets() (string, error) {
	dir := os.Getenv(EnvAssets)
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, name)); dir == "" || err != nil || st.IsDir() {
			return "", ErrNoAssets
		}
	}
	return dir, nil
}

// WaitGone waits until ctx ends or cond is true, polling: for tests that wait on the API server
// (a namespace's objects) where no signal exists.
func WaitGone(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return true
}
