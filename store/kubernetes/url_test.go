package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	uc, err := parseURL("remediation?kubeconfig=/etc/kube/config&context=prod")
	if err != nil || uc != (urlConfig{namespace: "remediation", kubeconfig: "/etc/kube/config", context: "prod"}) {
		t.Fatalf("parseURL = %+v, %v", uc, err)
	}
	if uc, err := parseURL(""); err != nil || uc != (urlConfig{}) {
		t.Fatalf("parseURL(\"\") = %+v, %v; want the pod's namespace and in-cluster config", uc, err)
	}
	for bad, want := range map[string]string{
		"Not_A_Namespace":       "namespace",
		"ns?x=1":                `unknown parameter "x"`,
		"ns?context=prod":       "needs kubeconfig",
		"ns?kubeconfig=%zz":     "invalid URL escape",
		strings.Repeat("n", 64): "namespace",
	} {
		if _, err := parseURL(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseURL(%q) = %v, want an error containing %q", bad, err, want)
		}
	}
}

func TestOpenURLErrorsNameTheProblem(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, _, err := OpenURL(context.Background(), "ns?kubeconfig="+missing, nil); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	if _, err := os.Stat(inClusterNamespace); err != nil { // not in a pod
		if _, _, err := OpenURL(context.Background(), "", nil); err == nil {
			t.Error("OpenURL without namespace outside a pod succeeded")
		}
	}
}
