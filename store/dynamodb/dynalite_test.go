package dynamodb

// Test helpers shared by this package's tests; the server itself is dynalitetest's.

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batonhq/baton/store/dynamodb/dynalitetest"
)

var tableSeq atomic.Int64

// freshTable returns a table name no other test uses.
func freshTable() string {
	return fmt.Sprintf("baton-test-%d-%d", os.Getpid(), tableSeq.Add(1))
}

func testConfig(endpoint, table string) Config {
	return Config{Table: table, Region: dynalitetest.Region, Endpoint: endpoint, Credentials: dynalitetest.Credentials, CreateTable: true}
}

// openTest opens a store on table at endpoint, closed when the test ends.
func openTest(t testing.TB, endpoint, table string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, testConfig(endpoint, table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// deleteItem deletes the item of key behind the store's back.
func deleteItem(t testing.TB, s *Store, key string) {
	t.Helper()
	_, err := s.Client().DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(s.Table()), Key: keyOf(key)})
	if err != nil {
		t.Fatal(err)
	}
}
