package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// k8sObject is the part of a Kubernetes object the deployment test reads.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Resources  []string          `yaml:"resources"` // a Kustomization's
	Spec       struct {
		Replicas       int `yaml:"replicas"`
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		// A Deployment's or PodDisruptionBudget's {matchLabels: {…}}, or a Service's labels.
		Selector map[string]any `yaml:"selector"`
		Ports    []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
					RunAsUser    int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []struct {
					Name   string `yaml:"name"`
					Secret struct {
						SecretName string `yaml:"secretName"`
						Items      []struct{ Key, Path string }
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// selects reads a selector as labels: a Service's as it is, another's matchLabels.
func (o *k8sObject) selects() map[string]string {
	sel := o.Spec.Selector
	if ml, ok := sel["matchLabels"].(map[string]any); ok {
		sel = ml
	}
	out := map[string]string{}
	for k, v := range sel {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom struct {
			SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  k8sProbe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// readManifests parses every YAML document of deploy/kubernetes, by kind.
func readManifests(t *testing.T) map[string][]*k8sObject {
	t.Helper()
	files, _ := filepath.Glob("../deploy/kubernetes/*.yaml")
	byKind := map[string][]*k8sObject{}
	var listed []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o k8sObject
			if err := dec.Decode(&o); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "" || o.APIVersion == "" {
				t.Errorf("%s: a document without kind or apiVersion", f)
			}
			byKind[o.Kind] = append(byKind[o.Kind], &o)
			if o.Kind == "Kustomization" {
				listed = append(listed, o.Resources...)
			}
		}
	}
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(listed, name) {
			t.Errorf("kustomization.yaml does not list %s", name)
		}
	}
	return byKind
}

func one(t *testing.T, objs map[string][]*k8sObject, kind string) *k8sObject {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("deploy/kubernetes has %d objects of kind %s, want 1", len(objs[kind]), kind)
	}
	return objs[kind][0]
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// serveEnvVars are the variables that `baton serve --help` names, one per flag.
func serveEnvVars(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("baton serve --help: %v\n%s", err, out)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(env (BATON_[A-Z_]+)`).FindAllStringSubmatch(string(out), -1) {
		vars[m[1]] = true
	}
	if len(vars) < 10 {
		t.Fatalf("baton serve --help names %d variables:\n%s", len(vars), out)
	}
	return vars
}

// dockerfile is what the deployment test reads of deploy/docker/Dockerfile.
type dockerfile struct {
	stages     int
	build      string   // the RUN line with go build
	user       string   // the last USER
	entrypoint []string // the last ENTRYPOINT, exec form
	copied     string   // where the final stage copies the binary
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("../deploy/docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	for _, line := range strings.Split(string(b), "\n") {
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch word {
		case "FROM":
			d.stages++
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.build = rest
			}
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = nil
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: not the exec form: %v", rest, err)
			}
		case "COPY":
			if f := strings.Fields(rest); strings.HasPrefix(rest, "--from=build") && f[len(f)-2] == "/out/baton" {
				d.copied = f[len(f)-1]
			}
		}
	}
	return d
}

// The container image recipe and the Kubernetes manifests of deploy/ fit the binary: the
// Dockerfile's own `go build` line builds a static binary here, its entrypoint is that binary's
// `serve`, run as a non-root user; the manifests run several replicas with the DSN from a
// Secret, set only variables that `baton serve --help` names, wire readiness to /readyz and
// liveness to /healthz, and select their pods in the Service and the PodDisruptionBudget. Then
// the binary built by the Dockerfile's line runs with the Deployment's environment (its store:
// the test PostgreSQL; its auth file: the Secret's) on a non-loopback address, and both probe
// paths answer 200. No container runtime or cluster is involved: the image build and the
// manifests' admission by a real API server are not tested.
func TestDeployRecipes(t *testing.T) {
	t.Parallel()
	d := readDockerfile(t)
	if d.stages < 2 || d.build == "" || d.copied == "" {
		t.Fatalf("Dockerfile: %d stages, build %q, copied to %q: want a multi-stage build that copies /out/baton", d.stages, d.build, d.copied)
	}
	if d.user == "" || d.user == "0" || strings.HasPrefix(d.user, "root") || strings.HasPrefix(d.user, "0:") {
		t.Errorf("Dockerfile: USER %q, want a non-root user", d.user)
	}
	if !slices.Equal(d.entrypoint, []string{d.copied, "serve"}) {
		t.Errorf("Dockerfile: ENTRYPOINT %q, want [%q serve]", d.entrypoint, d.copied)
	}

	// The Dockerfile's build line, as written, with its output here.
	bin := filepath.Join(t.TempDir(), "baton")
	line := strings.NewReplacer("${VERSION}", "v0.0.0-deploytest", "${REVISION}", "0123456789abcdef0123456789abcdef01234567", "/out/baton", bin).Replace(d.build)
	build := exec.Command("sh", "-c", line)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build line failed: %s\n%v\n%s", line, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the Dockerfile's build is not static: it needs an ELF interpreter")
		}
	}
	f.Close()
	if out, _ := exec.Command(bin, "version").Output(); !strings.Contains(string(out), "v0.0.0-deploytest") ||
		!strings.Contains(string(out), "0123456789ab") {
		t.Errorf("baton version of the Dockerfile's build: %q, want the VERSION and REVISION build arguments", out)
	}
	vars := serveEnvVars(t, bin)

	objs := readManifests(t)
	dep := one(t, objs, "Deployment")
	svc := one(t, objs, "Service")
	pdb := one(t, objs, "PodDisruptionBudget")
	secrets := map[string]*k8sObject{}
	for _, s := range objs["Secret"] {
		secrets[s.Metadata.Name] = s
	}
	if dep.Spec.Replicas < 2 {
		t.Errorf("Deployment: %d replicas, want several", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template
	if !matches(dep.selects(), pod.Metadata.Labels) {
		t.Errorf("Deployment's selector %v does not select its pods %v", dep.selects(), pod.Metadata.Labels)
	}
	if !pod.Spec.SecurityContext.RunAsNonRoot {
		t.Error("Deployment: runAsNonRoot is not set")
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("Deployment: %d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if len(c.Command) != 0 {
		t.Errorf("the container overrides the image's entrypoint: %q", c.Command)
	}
	help, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	for _, a := range c.Args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && !strings.Contains(string(help), "--"+name+" ") {
			t.Errorf("container arg %q: baton serve has no flag --%s", a, name)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if !vars[e.Name] {
			t.Errorf("container env %s: baton serve --help names no such variable", e.Name)
		}
		env[e.Name] = e.Value
		if ref := e.ValueFrom.SecretKeyRef; ref.Name != "" {
			if s := secrets[ref.Name]; s == nil || s.StringData[ref.Key] == "" {
				t.Errorf("env %s: no Secret %s with key %s in the manifests", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = "secret:" + ref.Name + "/" + ref.Key
		}
	}
	if env["BATON_STORE"] != "secret:baton-store/dsn" || !strings.HasPrefix(secrets["baton-store"].StringData["dsn"], "postgres://") {
		t.Errorf("BATON_STORE is %q, want the PostgreSQL DSN from the Secret", env["BATON_STORE"])
	}
	portNames := map[string]int{}
	for _, p := range c.Ports {
		portNames[p.Name] = p.ContainerPort
	}
	for _, p := range []struct {
		what  string
		probe k8sProbe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if p.probe.HTTPGet.Path != p.path || portNames[p.probe.HTTPGet.Port] == 0 {
			t.Errorf("%s: GET %s on port %q, want %s on a container port", p.what, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port, p.path)
		}
	}
	if _, port, _ := net.SplitHostPort(env["BATON_LISTEN"]); port != "7725" || portNames["http"] != 7725 {
		t.Errorf("BATON_LISTEN %q and container port %d disagree", env["BATON_LISTEN"], portNames["http"])
	}
	// The auth file is the auth Secret, mounted.
	var tokens string
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.Secret.SecretName == "" {
				continue
			}
			for _, it := range v.Secret.Items {
				if filepath.Join(m.MountPath, it.Path) == env["BATON_AUTH_FILE"] && secrets[v.Secret.SecretName] != nil {
					tokens = secrets[v.Secret.SecretName].StringData[it.Key]
				}
			}
		}
	}
	if tokens == "" {
		t.Errorf("BATON_AUTH_FILE %q is not a mounted Secret's key of the manifests", env["BATON_AUTH_FILE"])
	}
	if !matches(svc.selects(), pod.Metadata.Labels) {
		t.Errorf("the Service does not select the Deployment's pods")
	}
	if len(svc.Spec.Ports) != 1 || portNames[svc.Spec.Ports[0].TargetPort] == 0 {
		t.Errorf("the Service's ports %+v do not target a container port", svc.Spec.Ports)
	}
	if !matches(pdb.selects(), pod.Metadata.Labels) || (pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil) {
		t.Errorf("the PodDisruptionBudget does not bound the Deployment's pods: %+v", pdb.Spec)
	}
	if t.Failed() {
		return
	}

	// The Dockerfile's binary with the Deployment's environment, on PostgreSQL.
	dir := t.TempDir()
	authFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(authFile, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(env["BATON_LISTEN"])
	_, port, _ := net.SplitHostPort(freeAddr(t))
	env["BATON_LISTEN"] = net.JoinHostPort(host, port)
	env["BATON_STORE"] = postgresURL(t)
	env["BATON_AUTH_FILE"] = authFile
	cmd := exec.Command(d.entrypoint[0], d.entrypoint[1:]...)
	cmd.Path = bin
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("baton serve after SIGTERM: %v\n%s", err, log.String())
		}
	}()
	for _, path := range []string{c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path} {
		url := "http://127.0.0.1:" + port + path
		waitFor(t, "GET "+url+" to answer 200", func() bool {
			resp, err := http.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	if !strings.Contains(log.String(), `"auth":true`) {
		t.Errorf("the server did not log that it serves with auth (json log):\n%s", log.String())
	}
}
