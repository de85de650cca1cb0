package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/batonhq/baton/store"
)

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// urlConfig is what a store URL says.
type urlConfig struct {
	namespace, kubeconfig, context string
}

// OpenURL opens a store from the part of a Kubernetes store URL after "kubernetes://":
//
//	[namespace][?kubeconfig=PATH&context=NAME]
//
// Without kubeconfig the in-cluster configuration (the pod's service account) is used; without
// a namespace, the pod's own. It is the opener cmd/baton-full registers for the kubernetes
// scheme. name is safe to log.
func OpenURL(ctx context.Context, rest string, _ *slog.Logger) (st store.Store, name string, err error) {
	uc, err := parseURL(rest)
	if err != nil {
		return nil, "", fmt.Errorf("store URL kubernetes://%s: %w", rest, err)
	}
	rc, err := uc.restConfig()
	if err != nil {
		return nil, "", fmt.Errorf("store URL kubernetes://%s: %w", rest, err)
	}
	if uc.namespace == "" {
		b, err := os.ReadFile(inClusterNamespace)
		if err != nil {
			return nil, "", fmt.Errorf("store URL kubernetes://%s: no namespace given and not in a pod: %w", rest, err)
		}
		uc.namespace = strings.TrimSpace(string(b))
	}
	name = "kubernetes:" + uc.namespace
	s, err := Open(ctx, rc, Config{Namespace: uc.namespace})
	if err != nil {
		return nil, "", fmt.Errorf("store %s: %w", name, err)
	}
	return s, name, nil
}

func parseURL(rest string) (urlConfig, error) {
	var uc urlConfig
	ns, query, _ := strings.Cut(rest, "?")
	uc.namespace = strings.TrimSuffix(ns, "/")
	if uc.namespace != "" {
		if errs := validation.IsDNS1123Label(uc.namespace); len(errs) > 0 {
			return uc, fmt.Errorf("namespace %q: %s", uc.namespace, strings.Join(errs, "; "))
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return uc, err
	}
	for k := range q {
		switch k {
		case "kubeconfig":
			uc.kubeconfig = q.Get(k)
		case "context":
			uc.context = q.Get(k)
		default:
			return uc, fmt.Errorf("unknown parameter %q (kubeconfig, context)", k)
		}
	}
	if uc.context != "" && uc.kubeconfig == "" {
		return uc, fmt.Errorf("context %q needs kubeconfig", uc.context)
	}
	return uc, nil
}

// restConfig is the in-cluster configuration, or the kubeconfig file's (its current context,
// or the one named).
func (uc urlConfig) restConfig() (*rest.Config, error) {
	if uc.kubeconfig == "" {
		return nil, nil // Open uses the in-cluster configuration
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: uc.kubeconfig}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: uc.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", uc.kubeconfig, err)
	}
	return rc, nil
}
