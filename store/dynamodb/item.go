package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// One item per lease key, never deleted (the least-permission IAM policy grants no DeleteItem):
//
//	k    S  the lease key (partition key)
//	st   S  held | released | forced: the last two are tombstones
//	lid  S  lease ID of the current or last lease
//	hold S  its holder
//	own  S  its owner (AcquireParams.Owner), absent if none: items of earlier versions have none
//	tok  N  fencing token: incremented (ADD) by every grant, kept on tombstones
//	rvn  S  record version number: random, new on every write (grant, renew, release)
//	dur  N  the lease's TTL in ns
//	cd   N  its cooldown in ns
//	ld   N  its lock-delay in ns
//	md   S  its metadata (JSON), absent if none
//	acq  N  when it was granted, unix ns on the granting client's wall clock (reported only)
//	pn   N  on a tombstone: the rest (cooldown or lock-delay) that follows it, in ns; 0 if none
const (
	stHeld     = "held"
	stReleased = "released"
	stForced   = "forced"
)

// item is a decoded lease item.
type item struct {
	key, state, leaseID, holder, rvn string
	owner                            string // "" if none
	token                            uint64
	ttl, cooldown, lockDelay, rest   time.Duration
	metadata                         json.RawMessage
	acquiredAt                       time.Time
}

func decodeItem(m map[string]types.AttributeValue) (*item, error) {
	if len(m) == 0 {
		return nil, nil
	}
	it := &item{key: str(m, "k"), state: str(m, "st"), leaseID: str(m, "lid"), holder: str(m, "hold"), owner: str(m, "own"), rvn: str(m, "rvn")}
	var nums [6]int64
	for i, name := range []string{"tok", "dur", "cd", "ld", "pn", "acq"} {
		v, ok := m[name].(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dynamodb: bad attribute %s=%q on item %q", name, v.Value, it.key)
		}
		nums[i] = n
	}
	it.token = uint64(nums[0])
	it.ttl, it.cooldown, it.lockDelay, it.rest = time.Duration(nums[1]), time.Duration(nums[2]), time.Duration(nums[3]), time.Duration(nums[4])
	it.acquiredAt = time.Unix(0, nums[5]).UTC()
	if md := str(m, "md"); md != "" {
		it.metadata = json.RawMessage(md)
	}
	if it.state == "" || it.rvn == "" {
		return nil, fmt.Errorf("dynamodb: item %q is not a Baton lease (no st or rvn attribute)", it.key)
	}
	return it, nil
}

func str(m map[string]types.AttributeValue, name string) string {
	if v, ok := m[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nv(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keyAttr: sv(key)}
}

// newRVN returns a fresh record version number.
func newRVN() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var (
	nameRef  = regexp.MustCompile(`#[a-z]+`)
	valueRef = regexp.MustCompile(`:[a-z]+`)
)

// update is one conditional UpdateItem. Attribute names are written #name in the expressions
// (some, like ttl, are reserved words) and map to name; values map from :name. Only the names
// and values the expressions use are sent, since DynamoDB refuses unused ones.
type update struct {
	key        string
	set, cond  string
	vals       map[string]types.AttributeValue
	returnVals types.ReturnValue
}

func (s *Store) run(ctx context.Context, u update) (map[string]types.AttributeValue, error) {
	exprs := u.set + " " + u.cond
	names := map[string]string{}
	for _, ref := range nameRef.FindAllString(exprs, -1) {
		names[ref] = ref[1:]
	}
	vals := map[string]types.AttributeValue{}
	for _, ref := range valueRef.FindAllString(exprs, -1) {
		if v, ok := u.vals[ref]; ok {
			vals[ref] = v
		}
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: keyOf(u.key),
		UpdateExpression: aws.String(u.set), ExpressionAttributeNames: names, ReturnValues: u.returnVals,
	}
	if u.cond != "" {
		in.ConditionExpression = aws.String(u.cond)
	}
	if len(vals) > 0 {
		in.ExpressionAttributeValues = vals
	}
	out, err := s.cli.UpdateItem(ctx, in)
	if err != nil {
		return nil, s.closed.Wrap(err)
	}
	return out.Attributes, nil
}

// conditionFailed reports whether err is a refused condition (someone else changed the item).
func conditionFailed(err error) bool {
	var c *types.ConditionalCheckFailedException
	return errors.As(err, &c)
}

// read returns the item of key (strongly consistent), nil if there is none, and the instant
// its answer arrived, from which an observation of it may count.
func (s *Store) read(ctx context.Context, key string) (*item, time.Time, error) {
	out, err := s.cli.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	at := s.now()
	if err != nil {
		return nil, at, s.closed.Wrap(err)
	}
	it, err := decodeItem(out.Item)
	return it, at, err
}
