// Package web is the dashboard: a small single-page app that the server
// serves itself, from files embedded in the binary (no CDN, no npm, no
// build step). The page signs in with an API key, keeps it in the tab's
// sessionStorage, and calls the JSON API under /v1 with it as a bearer
// token, exactly as any other client does: the dashboard has no powers of
// its own, and what it shows is what the key's role may see.
//
// Handler puts the dashboard in front of the API: the page at /, its
// assets under /assets/, and everything else (all of /v1) to the API,
// untouched. See docs/dashboard.md.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// assets is the static directory as served under /assets/.
var assets = mustSub(static, "static")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// contentSecurityPolicy lets the page load only its own assets and talk
// only to its own server: no inline script, no third party.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the dashboard at / and /assets/, and passes every other
// request to api.
func Handler(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.HandleFunc("GET /{$}", index)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", assetServer()))
	return mux
}

// index serves the app's one page.
func index(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		http.Error(w, "dashboard missing from this build", http.StatusInternalServerError)
		return
	}
	secure(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// assetServer serves the embedded assets but not index.html (served at /)
// and not directory listings.
func assetServer() http.Handler {
	files := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Clean("/" + r.URL.Path)
		if name == "/" || strings.HasSuffix(r.URL.Path, "/") || name == "/index.html" {
			http.NotFound(w, r)
			return
		}
		secure(w.Header())
		// Assets change only with the binary; revalidate so that an
		// upgrade is picked up at once.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

func secure(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}
