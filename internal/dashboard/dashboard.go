// Package dashboard holds Baton's web dashboard: static HTML, CSS and JavaScript modules
// embedded in the binary (no build step, nothing fetched at run time). The page holds no data
// of its own; it calls the /v1 HTTP API from the browser with the token the operator enters.
// See docs/dashboard.md.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// securityHeaders forbid everything the dashboard does not need: no inline script or style,
// no other origin, no framing (clickjacking of the force-release button).
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

// file is one asset with its validator.
type file struct {
	body  []byte
	etag  string
	ctype string
}

// Handler serves the page at "/" and its assets under "/ui/"; every other path (and an unknown
// asset) goes to notFound. Only GET and HEAD reach it.
func Handler(notFound http.Handler) http.Handler {
	files := map[string]*file{}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(p))
		if strings.HasSuffix(p, ".js") {
			ctype = "text/javascript; charset=utf-8" // modules need a JavaScript type everywhere
		}
		files[strings.TrimPrefix(p, "assets/")] = &file{body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := ""
		switch {
		case r.URL.Path == "/":
			name = "index.html"
		case strings.HasPrefix(r.URL.Path, "/ui/"):
			name = strings.TrimPrefix(r.URL.Path, "/ui/")
			if name == "index.html" {
				name = ""
			}
		}
		f := files[name]
		if f == nil {
			notFound.ServeHTTP(w, r)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", f.ctype)
		// Revalidate every time: a new binary serves new assets under the same names.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", f.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
	})
}
