package server

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 document of the HTTP API, served at GET /v1/openapi.json. Tests
// check that it lists exactly the server's routes and that the server's answers match it.
//
//go:embed openapi.json
var OpenAPI []byte

// serveOpenAPI needs no role: the document is public (it is in the repository), and clients and
// code generators fetch it before they have a token.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ principal) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(OpenAPI)
}
