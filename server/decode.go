package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/batonhq/baton/internal/wire"
	"github.com/batonhq/baton/store"
)

// MaxBodyBytes bounds request bodies.
const MaxBodyBytes = 64 << 10

// decode reads one JSON object of at most MaxBodyBytes into dst, rejecting unknown fields and
// trailing data. It answers the problem itself and returns false on bad input.
func decode(w http.ResponseWriter, r *http.Request, dst any) bool {
	return decodeBody(w, r, dst, false, MaxBodyBytes)
}

// MaxBatchBodyBytes bounds the bodies of batch requests (POST /v1/locks/renew-batch).
const MaxBatchBodyBytes = 1 << 20

// decodeBatch is decode for batch requests, whose bodies may reach MaxBatchBodyBytes.
func decodeBatch(w http.ResponseWriter, r *http.Request, dst any) bool {
	return decodeBody(w, r, dst, false, MaxBatchBodyBytes)
}

// decodeLocating is decode, except that a syntax error inside the value of a top-level member
// is reported on that member (e.g. "args") rather than on the whole body.
func decodeLocating(w http.ResponseWriter, r *http.Request, dst any) bool {
	return decodeBody(w, r, dst, true, MaxBodyBytes)
}

func decodeBody(w http.ResponseWriter, r *http.Request, dst any, locate bool, limit int64) bool {
	if !jsonBody(w, r) {
		return false
	}
	var raw []byte
	var err error
	switch dst.(type) {
	case *wire.AcquireRequest, *wire.ReleaseRequest:
		// The bodies of the lock cycle are read into a buffer used again: their values are
		// copies (strings, and encoding/json copies a json.RawMessage), and nothing keeps raw.
		buf := bodyBufs.Get().(*bytes.Buffer)
		defer func() {
			if buf.Cap() <= 64<<10 { // an outsized body's buffer is not kept
				bodyBufs.Put(buf)
			}
		}()
		buf.Reset()
		_, err = buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
		raw = buf.Bytes()
	default:
		raw, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if err == nil {
		if decodeFast(raw, dst) {
			// Printable ASCII without escapes: JSONTextRule would find nothing.
			return true
		}
		err = decodeJSON(raw, dst)
	}
	if err == nil {
		// encoding/json turns invalid UTF-8 and escapes of unpaired surrogates into U+FFFD, so
		// that two different keys would become one: refuse them, naming the member. (\u0000 is
		// left to the fields' own rules: a control character in a key, NUL in metadata.)
		if rule := store.JSONTextRule(raw, false); rule != "" {
			writeProblem(w, invalidArg(memberWith(raw), rule))
			return false
		}
		return true
	}
	writeProblem(w, bodyProblem(err, raw, locate, limit))
	return false
}

// bodyBufs holds the buffers decodeBody reads the lock cycle's bodies into.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// jsonBody answers 415 and returns false unless the request's body is application/json.
func jsonBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Content-Type") == "application/json" {
		return true // what clients send, without parsing it
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeProblem(w, newProblem(http.StatusUnsupportedMediaType, "unsupported_media_type", "the body must be application/json"))
		return false
	}
	return true
}

// decodeFast decodes the bodies of the lock cycle without reflection when they have the usual
// shape: only printable ASCII, strings without escapes (the values are the same as
// encoding/json's). It returns false, dst left zero, for anything else.
func decodeFast(raw []byte, dst any) bool {
	switch dst := dst.(type) {
	case *wire.AcquireRequest:
		if wire.ParseAcquireRequest(raw, dst) {
			return true
		}
		*dst = wire.AcquireRequest{}
	case *wire.ReleaseRequest:
		if wire.ParseReleaseRequest(raw, dst) {
			return true
		}
		*dst = wire.ReleaseRequest{}
	}
	return false
}

// decodeStrict decodes raw, one JSON value, into dst, refusing unknown fields and trailing data.
func decodeStrict(raw []byte, dst any) error {
	if decodeFast(raw, dst) {
		return nil
	}
	return decodeJSON(raw, dst)
}

// decodeJSON is decodeStrict with encoding/json alone (anything decodeFast does not take,
// errors included).
func decodeJSON(raw []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("trailing data after the JSON object")
		}
	}
	return err
}

// bodyProblem is the problem of a body that could not be read or decoded (err) into a value of
// at most limit bytes; raw is what was read. With locate, a syntax error inside the value of a
// top-level member is reported on that member.
func bodyProblem(err error, raw []byte, locate bool, limit int64) *problem {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.Is(err, errBodyTimeout):
		return newProblem(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive in time; send the body with the headers")
	case errors.As(err, &tooBig):
		return newProblem(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body must be at most %d bytes", limit))
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return invalidArg(field, "must be a JSON "+jsonKind(typeErr.Type.Kind().String()))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		field := "body"
		if locate {
			field = memberAt(raw)
		}
		return invalidArg(field, "must be valid JSON ("+err.Error()+")")
	case errors.Is(err, io.EOF):
		return invalidArg("body", "must be a JSON object, not empty")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidArg(field, "is not a known field")
	default:
		return invalidArg("body", err.Error())
	}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int64", "int", "uint64":
		return "integer"
	case "bool":
		return "boolean"
	case "struct", "map":
		return "object"
	default:
		return goKind
	}
}

// memberAt returns the top-level member of a JSON object in whose value raw stops being valid
// JSON, or "body" if it breaks outside any member's value or is merely cut short.
func memberAt(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "body"
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return "body"
		}
		var v json.RawMessage
		var syntaxErr *json.SyntaxError
		if err := dec.Decode(&v); errors.As(err, &syntaxErr) {
			return key
		} else if err != nil {
			return "body"
		}
	}
	return "body"
}

// memberWith returns the top-level member of raw, a JSON object, whose name or value is not
// Unicode text (see store.JSONTextRule), or "body" if none is.
func memberWith(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "body"
	}
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return "body"
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "body"
		}
		if store.JSONTextRule(raw[start:dec.InputOffset()], false) != "" {
			return key
		}
	}
	return "body"
}
