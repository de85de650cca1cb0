package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// keyAttr is the table's partition key: the lease key.
const keyAttr = "k"

// tableReady bounds the wait for a table created on Open to become ACTIVE.
const tableReady = 2 * time.Minute

// ensureTable checks that the table exists with the expected key schema, creating it first if
// create is set. Errors name the table and, for a refusal, the permission that is missing.
func ensureTable(ctx context.Context, cli *dynamodb.Client, table, region string, create bool) error {
	out, err := cli.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound) && create:
		if err := createTable(ctx, cli, table); err != nil {
			return err
		}
		return nil
	case errors.As(err, &notFound):
		return fmt.Errorf("dynamodb: table %q does not exist in region %s: create it with partition key %q (type S), "+
			"or let Baton create it (Config.CreateTable, URL parameter create_table=true), which needs the dynamodb:CreateTable permission",
			table, region, keyAttr)
	case err != nil:
		return permissionError(table, "dynamodb:DescribeTable", err)
	}
	return checkSchema(table, out.Table)
}

func createTable(ctx context.Context, cli *dynamodb.Client, table string) error {
	_, err := cli.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // in use: another process is creating it
		return permissionError(table, "dynamodb:CreateTable", err)
	}
	w := dynamodb.NewTableExistsWaiter(cli, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, time.Second
	})
	out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, tableReady)
	if err != nil {
		return fmt.Errorf("dynamodb: table %q created but not active: %w", table, err)
	}
	return checkSchema(table, out.Table)
}

// permissionError names the permission when DynamoDB refused access, and the table always.
func permissionError(table, action string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "AccessDeniedException" || api.ErrorCode() == "UnrecognizedClientException") {
		return fmt.Errorf("dynamodb: table %q: access denied, the credentials need the %s permission on it: %w", table, action, err)
	}
	return fmt.Errorf("dynamodb: table %q: %s: %w", table, action, err)
}

// checkSchema refuses a table whose key is not exactly the string partition key "k".
func checkSchema(table string, d *types.TableDescription) error {
	if d == nil {
		return fmt.Errorf("dynamodb: table %q: no description", table)
	}
	ok := len(d.KeySchema) == 1 && aws.ToString(d.KeySchema[0].AttributeName) == keyAttr && d.KeySchema[0].KeyType == types.KeyTypeHash
	if ok {
		ok = false
		for _, a := range d.AttributeDefinitions {
			if aws.ToString(a.AttributeName) == keyAttr {
				ok = a.AttributeType == types.ScalarAttributeTypeS
			}
		}
	}
	if !ok {
		return fmt.Errorf("dynamodb: table %q has the wrong key schema: want only a partition key %q of type S", table, keyAttr)
	}
	return nil
}
