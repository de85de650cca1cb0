package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/batonhq/baton/store/kubernetes/kubetest"
)

// The binary opens a kubernetes:// store URL with a kubeconfig file, as a user outside the
// cluster would: `baton-full serve` on a real kube-apiserver, then two `baton-full run`
// processes through it get increasing fencing tokens.
func TestServeOnKubernetesURL(t *testing.T) {
	assets, err := kubetest.Assets()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	c, err := kubetest.Start(assets, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rc := c.Config(kubetest.AdminToken)
	cs, err := k8s.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	serveAndRun(t, "kubernetes://ops?kubeconfig="+path)
}
