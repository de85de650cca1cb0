package dynamodb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
)

// denyProxy forwards to target but answers AccessDeniedException, as IAM does, to the
// operations in deny.
func denyProxy(t *testing.T, target string, deny ...string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.Header.Get("X-Amz-Target")
		for _, d := range deny {
			if strings.HasSuffix(op, "."+d) {
				writeAWSError(w, http.StatusBadRequest, "AccessDeniedException", "not authorized to perform: dynamodb:"+d)
				return
			}
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOpenTableErrors: every way Open can refuse a table names the table, and the permission
// when one is missing.
func TestOpenTableErrors(t *testing.T) {
	d := dynalitetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(endpoint, table string, create bool) error {
		cfg := testConfig(endpoint, table)
		cfg.CreateTable, cfg.MaxAttempts = create, 1
		s, err := Open(ctx, cfg)
		if err == nil {
			_ = s.Close()
		}
		return err
	}
	cases := []struct {
		name, endpoint, table string
		create                bool
		want                  []string
	}{
		{"missing", d.Endpoint(), "absent-table", false, []string{`"absent-table"`, "does not exist", "dynamodb:CreateTable", "create_table=true"}},
		{"describe denied", denyProxy(t, d.Endpoint(), "DescribeTable"), "denied-table", true, []string{`"denied-table"`, "access denied", "dynamodb:DescribeTable"}},
		{"create denied", denyProxy(t, d.Endpoint(), "CreateTable"), "no-create-table", true, []string{`"no-create-table"`, "access denied", "dynamodb:CreateTable"}},
	}
	for _, c := range cases {
		err := open(c.endpoint, c.table, c.create)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Open = %v; want an error containing %s", c.name, err, w)
			}
		}
	}
	// A table with another key schema is refused, not written to.
	direct := openTest(t, d.Endpoint(), freshTable())
	_, err := direct.Client().CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("wrong-schema"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := open(d.Endpoint(), "wrong-schema", false); err == nil || !strings.Contains(err.Error(), `"wrong-schema" has the wrong key schema`) {
		t.Errorf("Open on a table keyed by id = %v; want the wrong key schema named", err)
	}
}
