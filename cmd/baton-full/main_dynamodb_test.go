package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
)

// The binary opens a dynamodb:// store URL on dynalite: a missing table without create_table is
// refused with an error naming the table and the permission, then `baton-full serve` creates it
// and two `baton-full run` processes through it get increasing fencing tokens.
func TestServeOnDynamoDBURL(t *testing.T) {
	d := dynalitetest.Start(t)
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+dynalitetest.AccessKey, "AWS_SECRET_ACCESS_KEY="+dynalitetest.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true")
	bin := buildFull(t)
	storeURL := "dynamodb://baton-full?region=" + dynalitetest.Region + "&endpoint=" + d.Endpoint()

	refuse := exec.Command(bin, "serve", "--listen", freePort(t), "--store", storeURL)
	refuse.Env = env
	out, err := refuse.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `baton-full`) || !strings.Contains(string(out), "does not exist") || !strings.Contains(string(out), "dynamodb:CreateTable") {
		t.Fatalf("serve on a missing table without create_table: %v\n%s", err, out)
	}

	base, serveLog := startServe(t, bin, storeURL+"&create_table=true", env)
	checkRunTokens(t, bin, base, "full/k", serveLog)
}
