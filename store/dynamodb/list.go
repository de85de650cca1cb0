package dynamodb

import (
	"context"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batonhq/baton/store"
)

// List returns live leases in key order. It is a strongly consistent Scan of the whole table,
// filtered on the server to held items: its cost (read capacity and time) grows with every key
// ever used (tombstones are never deleted), not with the page asked for, since a Scan reads
// items in hash order, not key order, and DynamoDB bills filtered-out items too. The prefix and
// the cursor are applied here, byte-wise as Go compares strings. Listing is for operators, not
// for the lock path; a table with very many keys is better listed from an export.
func (s *Store) List(ctx context.Context, p *store.ListParams) ([]*store.Lease, error) {
	if err := s.closed.Check(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	filter := "#st = :held"
	vals := map[string]types.AttributeValue{":held": sv(stHeld)}
	names := map[string]string{"#st": "st"}
	if p.Holder != "" {
		filter += " AND #hold = :hold"
		vals[":hold"] = sv(p.Holder)
		names["#hold"] = "hold"
	}
	in := &dynamodb.ScanInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String(filter), ExpressionAttributeNames: names, ExpressionAttributeValues: vals}
	var out []*store.Lease
	for {
		page, err := s.cli.Scan(ctx, in)
		if err != nil {
			return nil, s.closed.Wrap(err)
		}
		at := s.now()
		for _, m := range page.Items {
			it, err := decodeItem(m)
			if err != nil {
				return nil, err
			}
			if it == nil || !strings.HasPrefix(it.key, p.Prefix) || (p.After != "" && it.key <= p.After) {
				continue
			}
			if l := s.live(it, at); l != nil {
				out = append(out, l)
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}
