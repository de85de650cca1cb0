package main

import (
	"net"
	"net/url"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The binary opens an etcd:// store URL: `baton-full serve` on a real (embedded) etcd, then two
// `baton-full run` processes through it get increasing fencing tokens.
func TestServeOnEtcdURL(t *testing.T) {
	client, peer := freePort(t), freePort(t)
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cu, _ := url.Parse("http://" + client)
	pu, _ := url.Parse("http://" + peer)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=http://" + peer
	cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync, cfg.LogLevel = 10, 100, true, "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	serveAndRun(t, "etcd://"+client+"?baton_prefix=full/")
}

// serveAndRun builds the binary, serves storeURL with it, and checks that two `baton-full run`
// processes through the server get increasing fencing tokens.
func serveAndRun(t *testing.T, storeURL string) {
	t.Helper()
	bin := buildFull(t)
	base, serveLog := startServe(t, bin, storeURL, nil)
	checkRunTokens(t, bin, base, "full/k", serveLog)
}
