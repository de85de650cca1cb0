package storeurl

import (
	"strings"
	"testing"
)

// Every secret a store URL of any scheme can carry is hidden; the rest (scheme, user name,
// hosts, database, other parameters) stays, so the URL still says which store it is.
func TestRedact(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		secrets   []string
	}{
		// PostgreSQL: the userinfo password, password and sslpassword parameters (any case,
		// percent-encoded or not), with reserved characters left unencoded, several hosts.
		{"postgres://baton:s3cret@db:5432/app?sslmode=disable", "postgres://baton:xxxxx@db:5432/app?sslmode=disable", []string{"s3cret"}},
		{"postgresql://baton@db/app?password=s3cret&sslpassword=k3y&application_name=api",
			"postgresql://baton@db/app?password=xxxxx&sslpassword=xxxxx&application_name=api", []string{"s3cret", "k3y"}},
		{"postgres://db/app?PassWord=s3cret&pass%77ord=k3y", "postgres://db/app?PassWord=xxxxx&pass%77ord=xxxxx", []string{"s3cret", "k3y"}},
		{"postgres://baton:p%40ss%2Fw0rd@db/app", "postgres://baton:xxxxx@db/app", []string{"p%40ss", "w0rd"}},
		{"postgres://baton:pa?ss@db/app", "postgres://baton:xxxxx@db/app", []string{"pa?ss", "ss@"}},
		{"postgres://baton:pa/ss@db/app", "postgres://baton:xxxxx@db/app", []string{"pa/ss"}},
		{"postgres://baton:pa#ss@db/app", "postgres://baton:xxxxx@db/app", []string{"pa#ss"}},
		{"postgres://baton:s3cret@h1:5432,h2:5432/app?target_session_attrs=read-write",
			"postgres://baton:xxxxx@h1:5432,h2:5432/app?target_session_attrs=read-write", []string{"s3cret"}},
		{"postgres://baton@db/app?baton_schema=jobs", "postgres://baton@db/app?baton_schema=jobs", nil},
		// Redis: the password alone (":pass@"), with a user, TLS, Redlock's one or several userinfos.
		{"redis://:s3cret@cache:6379/0", "redis://:xxxxx@cache:6379/0", []string{"s3cret"}},
		{"rediss://app:s3cret@cache:6380/2?baton_prefix=p:", "rediss://app:xxxxx@cache:6380/2?baton_prefix=p:", []string{"s3cret"}},
		{"redis+redlock://app:s3cret@r1:6379,r2:6379,r3:6379?baton_prefix=rl:",
			"redis+redlock://app:xxxxx@r1:6379,r2:6379,r3:6379?baton_prefix=rl:", []string{"s3cret"}},
		{"redis+redlock://app:s1@r1:6379,app:s2@r2:6379,app:s3@r3:6379",
			"redis+redlock://app:xxxxx@r3:6379", []string{"s1", "s2", "s3"}},
		// etcd: the userinfo of a host list; DynamoDB: a URL-valued parameter with userinfo (its
		// credentials never come from the URL, but an endpoint may carry some); secret-named
		// parameters of any scheme.
		{"etcd://root:s3cret@e1:2379,e2:2379?baton_prefix=p", "etcd://root:xxxxx@e1:2379,e2:2379?baton_prefix=p", []string{"s3cret"}},
		{"dynamodb://locks?region=eu-west-1&endpoint=http://AKID:s3cret@localhost:8000",
			"dynamodb://locks?region=eu-west-1&endpoint=http%3A%2F%2FAKID%3Axxxxx%40localhost%3A8000", []string{"s3cret"}},
		{"dynamodb://locks?aws_secret_access_key=s3cret&session_token=t0ken", "dynamodb://locks?aws_secret_access_key=xxxxx&session_token=xxxxx", []string{"s3cret", "t0ken"}},
		{"kubernetes://ops?kubeconfig=/etc/kube/config&context=prod", "kubernetes://ops?kubeconfig=/etc/kube/config&context=prod", nil},
		{"sqlite:///var/lib/baton.db", "sqlite:///var/lib/baton.db", nil},
		{"sqlite://./baton.db", "sqlite://./baton.db", nil},
		// Not scheme://…: a userinfo is still hidden.
		{"baton:s3cret@db/app", "baton:xxxxx@db/app", []string{"s3cret"}},
		{"", "", nil},
		// An '@' in a parameter's value, with no userinfo but a host:port, is taken for the '@'
		// of a password with an unescaped '/' or '?': more is hidden, never less.
		{"postgres://db:5432/app?application_name=a@b", "postgres://db:xxxxx@b", []string{"5432"}},
	} {
		got := redact(c.raw)
		if got != c.want {
			t.Errorf("redact(%q)\n got %q\nwant %q", c.raw, got, c.want)
		}
		for _, s := range c.secrets {
			if strings.Contains(got, s) {
				t.Errorf("redact(%q) = %q shows %q", c.raw, got, s)
			}
		}
	}
}
