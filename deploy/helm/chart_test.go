// Package helm holds the Helm chart of `baton serve` (baton/); its test renders the chart with
// Helm's own engine and strict-decodes every object into the Kubernetes API types. It is its own
// module so that Helm and the Kubernetes modules stay out of the core module.
package helm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "baton"

// objects are the rendered objects of one kind, by name, strictly decoded.
type objects struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	secrets         map[string]*corev1.Secret
	configMaps      map[string]*corev1.ConfigMap
	pdbs            map[string]*policyv1.PodDisruptionBudget
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
}

// decodeStrict decodes YAML documents into the Kubernetes API type of their kind, failing on a
// field the type does not have (a typo'd or misplaced field), a kind the test does not know, or
// a document without apiVersion or kind.
func decodeStrict(docs map[string]string) (*objects, error) {
	o := &objects{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{},
		pdbs: map[string]*policyv1.PodDisruptionBudget{}, serviceMonitors: map[string]*monitoringv1.ServiceMonitor{},
	}
	files := make([]string, 0, len(docs))
	for f := range docs {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") {
			continue // NOTES.txt, _helpers.tpl
		}
		for i, doc := range strings.Split(docs[f], "\n---") {
			if strings.TrimSpace(doc) == "" || isComment(doc) {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				return nil, fmt.Errorf("%s #%d: %v", f, i, err)
			}
			var into any
			var name func() string
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				x := &appsv1.Deployment{}
				into, name = x, func() string { o.deployments[x.Name] = x; return x.Name }
			case "v1 Service":
				x := &corev1.Service{}
				into, name = x, func() string { o.services[x.Name] = x; return x.Name }
			case "v1 Secret":
				x := &corev1.Secret{}
				into, name = x, func() string { o.secrets[x.Name] = x; return x.Name }
			case "v1 ConfigMap":
				x := &corev1.ConfigMap{}
				into, name = x, func() string { o.configMaps[x.Name] = x; return x.Name }
			case "policy/v1 PodDisruptionBudget":
				x := &policyv1.PodDisruptionBudget{}
				into, name = x, func() string { o.pdbs[x.Name] = x; return x.Name }
			case "monitoring.coreos.com/v1 ServiceMonitor":
				x := &monitoringv1.ServiceMonitor{}
				into, name = x, func() string { o.serviceMonitors[x.Name] = x; return x.Name }
			default:
				return nil, fmt.Errorf("%s #%d: apiVersion %q kind %q: not a kind the chart should render", f, i, tm.APIVersion, tm.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				return nil, fmt.Errorf("%s #%d (%s): %v", f, i, tm.Kind, err)
			}
			if name() == "" {
				return nil, fmt.Errorf("%s #%d (%s): no metadata.name", f, i, tm.Kind)
			}
		}
	}
	return o, nil
}

func isComment(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// valuesFile reads a values file of the chart (a path relative to the chart).
func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := common.ReadValuesFile(filepath.Join(chartDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// render renders the chart with Helm's engine, as `helm template` does, with the chart's values
// overridden by vals.
func render(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := util.ToRenderValues(chrt, vals, common.ReleaseOptions{Name: "baton", Namespace: "baton", IsInstall: true}, common.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Engine{Strict: true}.RenderWithContext(context.Background(), chrt, top)
}

// readKustomize strictly decodes the Kustomize manifests of deploy/kubernetes.
func readKustomize(t *testing.T) *objects {
	t.Helper()
	files, _ := filepath.Glob("../kubernetes/*.yaml")
	docs := map[string]string{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	o, err := decodeStrict(docs)
	if err != nil {
		t.Fatalf("deploy/kubernetes: %v", err)
	}
	return o
}

func only[T any](t *testing.T, what string, m map[string]T) T {
	t.Helper()
	if len(m) != 1 {
		t.Fatalf("%d %s objects rendered, want 1", len(m), what)
	}
	for _, v := range m {
		return v
	}
	panic("unreachable")
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

// checkEquivalent checks that a rendering runs the pods the Kustomize manifests run: the same
// container settings (probes, ports, lifecycle, resources, security), the same BATON_*
// variables, the store URL from a Secret and the auth file from a mounted Secret, a Service and
// a PodDisruptionBudget that select the pods.
// extraEnv are the variables the values add (server.extraEnv).
func checkEquivalent(t *testing.T, got, want *objects, storeSecret, storeKey, authSecret string, extraEnv ...string) {
	t.Helper()
	dep, kdep := only(t, "Deployment", got.deployments), only(t, "Deployment", want.deployments)
	c, kc := dep.Spec.Template.Spec.Containers[0], kdep.Spec.Template.Spec.Containers[0]
	for _, f := range []struct {
		what      string
		got, want any
	}{
		{"readinessProbe", c.ReadinessProbe, kc.ReadinessProbe},
		{"livenessProbe", c.LivenessProbe, kc.LivenessProbe},
		{"ports", c.Ports, kc.Ports},
		{"lifecycle", c.Lifecycle, kc.Lifecycle},
		{"resources", c.Resources, kc.Resources},
		{"container securityContext", c.SecurityContext, kc.SecurityContext},
		{"volumeMounts", c.VolumeMounts, kc.VolumeMounts},
		{"pod securityContext", dep.Spec.Template.Spec.SecurityContext, kdep.Spec.Template.Spec.SecurityContext},
		{"terminationGracePeriodSeconds", dep.Spec.Template.Spec.TerminationGracePeriodSeconds, kdep.Spec.Template.Spec.TerminationGracePeriodSeconds},
		{"replicas", dep.Spec.Replicas, kdep.Spec.Replicas},
		{"strategy", dep.Spec.Strategy, kdep.Spec.Strategy},
		{"env names", envNames(c), sorted(append(envNames(kc), extraEnv...))},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("Deployment %s: %+v, the Kustomize manifests have %+v", f.what, f.got, f.want)
		}
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %+v, liveness %+v; want /readyz and /healthz", c.ReadinessProbe, c.LivenessProbe)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if ref := env["BATON_STORE"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != storeSecret || ref.SecretKeyRef.Key != storeKey {
		t.Errorf("BATON_STORE: %+v, want Secret %s key %s", env["BATON_STORE"], storeSecret, storeKey)
	}
	vols := dep.Spec.Template.Spec.Volumes
	if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != authSecret ||
		len(c.VolumeMounts) != 1 || filepath.Join(c.VolumeMounts[0].MountPath, vols[0].Secret.Items[0].Path) != env["BATON_AUTH_FILE"].Value {
		t.Errorf("the auth file %s is not the Secret %s mounted: volumes %+v", env["BATON_AUTH_FILE"].Value, authSecret, vols)
	}
	podLabels := dep.Spec.Template.Labels
	selects := func(sel map[string]string) bool {
		for k, v := range sel {
			if podLabels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !selects(dep.Spec.Selector.MatchLabels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, podLabels)
	}
	svc := only(t, "Service", got.services)
	if !selects(svc.Spec.Selector) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("the Service does not select the pods or target port http: %+v", svc.Spec)
	}
	pdb, kpdb := only(t, "PodDisruptionBudget", got.pdbs), only(t, "PodDisruptionBudget", want.pdbs)
	if !selects(pdb.Spec.Selector.MatchLabels) || !reflect.DeepEqual(pdb.Spec.MaxUnavailable, kpdb.Spec.MaxUnavailable) {
		t.Errorf("the PodDisruptionBudget: %+v, want the pods selected and maxUnavailable %v", pdb.Spec, kpdb.Spec.MaxUnavailable)
	}
}

// The chart, rendered by Helm's engine with the values of a first install (the two secrets
// given), gives objects that strict-decode into the Kubernetes API types and run the pods the
// Kustomize manifests of deploy/kubernetes run; the ServiceMonitor and the dashboard ConfigMap
// are off. The chart also passes Helm's lint.
func TestChartMinimal(t *testing.T) {
	docs, err := render(t, valuesFile(t, "ci/minimal-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeStrict(docs)
	if err != nil {
		t.Fatal(err)
	}
	checkEquivalent(t, o, readKustomize(t), "baton-store", "dsn", "baton-auth")
	if len(o.secrets) != 2 || !strings.HasPrefix(o.secrets["baton-store"].StringData["dsn"], "postgres://") ||
		!strings.Contains(o.secrets["baton-auth"].StringData["tokens"], " admin ") {
		t.Errorf("Secrets: %+v, want baton-store (dsn) and baton-auth (tokens) from the values", o.secrets)
	}
	if len(o.serviceMonitors) != 0 || len(o.configMaps) != 0 {
		t.Errorf("the optional objects are rendered by default: %d ServiceMonitors, %d ConfigMaps", len(o.serviceMonitors), len(o.configMaps))
	}
	dep := only(t, "Deployment", o.deployments)
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != "baton:latest" {
		t.Errorf("image %q, want the repository with the chart's appVersion", img)
	}

	l := lint.RunAll(chartDir, valuesFile(t, "ci/minimal-values.yaml"), "baton")
	for _, m := range l.Messages {
		t.Log(m)
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %v", m)
		}
	}
}

// With secrets made outside the chart and the options on: the ServiceMonitor scrapes /metrics
// on the Service's port, and the dashboard ConfigMap holds deploy/grafana/baton.json.
func TestChartFull(t *testing.T) {
	docs, err := render(t, valuesFile(t, "ci/full-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeStrict(docs)
	if err != nil {
		t.Fatal(err)
	}
	checkEquivalent(t, o, readKustomize(t), "my-baton-store", "url", "my-baton-auth", "BATON_MAX_INFLIGHT")
	if len(o.secrets) != 0 {
		t.Errorf("the chart made Secrets though existing ones are named: %v", o.secrets)
	}
	dep := only(t, "Deployment", o.deployments)
	if !slices.Contains(envNames(dep.Spec.Template.Spec.Containers[0]), "BATON_MAX_INFLIGHT") ||
		len(dep.Spec.Template.Spec.ImagePullSecrets) != 1 {
		t.Errorf("server.extraEnv or imagePullSecrets not rendered: %+v", dep.Spec.Template.Spec)
	}
	sm := only(t, "ServiceMonitor", o.serviceMonitors)
	svc := only(t, "Service", o.services)
	if sm.Labels["release"] != "prometheus" || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name ||
		sm.Spec.Endpoints[0].Path != "/metrics" || !reflect.DeepEqual(sm.Spec.Selector.MatchLabels, svc.Labels) && !subset(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor: %+v, want /metrics on the Service's port %q, selecting the Service %v", sm, svc.Spec.Ports[0].Name, svc.Labels)
	}
	cm := only(t, "ConfigMap", o.configMaps)
	want, err := os.ReadFile("../grafana/baton.json")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Baton" ||
		strings.TrimSpace(cm.Data["baton.json"]) != strings.TrimSpace(string(want)) {
		t.Errorf("the dashboard ConfigMap: labels %v, annotations %v, %d bytes of baton.json; want deploy/grafana/baton.json (%d bytes)",
			cm.Labels, cm.Annotations, len(cm.Data["baton.json"]), len(want))
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// The chart's copy of the dashboard is deploy/grafana/baton.json (Helm cannot read files
// outside the chart): copy it again after changing the dashboard.
func TestChartDashboardIsTheDashboard(t *testing.T) {
	a, err := os.ReadFile("../grafana/baton.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "dashboards/baton.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("deploy/helm/baton/dashboards/baton.json differs from deploy/grafana/baton.json: cp deploy/grafana/baton.json deploy/helm/baton/dashboards/")
	}
}

// Without the secrets, rendering fails naming the value to give.
func TestChartNeedsTheSecrets(t *testing.T) {
	if _, err := render(t, nil); err == nil || !strings.Contains(err.Error(), "store.dsn or store.existingSecret is required") {
		t.Errorf("render with the chart's defaults: %v, want an error naming store.dsn", err)
	}
	vals := map[string]any{"store": map[string]any{"dsn": "postgres://baton@db/baton"}}
	if _, err := render(t, vals); err == nil || !strings.Contains(err.Error(), "auth.tokens or auth.existingSecret is required") {
		t.Errorf("render without auth: %v, want an error naming auth.tokens", err)
	}
}

// The strict decode fails on a misplaced or typo'd field, and on an unknown kind.
func TestDecodeStrictRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"typo":         "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 3\n",
		"misplaced":    "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  port: 80\n",
		"unknown kind": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n",
		"no name":      "apiVersion: v1\nkind: Secret\nmetadata: {}\n",
	} {
		if _, err := decodeStrict(map[string]string{"t.yaml": doc}); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
