package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Auth holds the credentials of an auth file. The file has one credential
// a line; blank lines and lines starting with # are ignored:
//
//	token <secret> [tenant]
//	basic <user> <password> [tenant]
//
// A token is sent as "Authorization: Bearer <secret>", a basic credential
// as HTTP basic auth. A password (or token secret) written as
// sha256:<64 hex digits> is compared by its SHA-256; one written as a
// bcrypt hash ($2a$, $2b$ or $2y$, as htpasswd -B makes) with bcrypt;
// any other is the secret itself. Comparisons of secrets and SHA-256
// hashes take constant time. bcrypt is slow on purpose, so a secret it
// accepted is remembered (by a SHA-256 of user, secret and hash, in
// memory) and the next requests with it are not slowed down; wrong
// secrets are never remembered. A credential with a
// tenant may only use that tenant (X-Scope-OrgID, if sent, must name it);
// one without may name any tenant in X-Scope-OrgID (default "fake").
type Auth struct {
	creds []credential

	mu       sync.Mutex
	accepted map[[32]byte]bool // bcrypt checks passed, by SHA-256 of kind, user, secret and hash
}

type credential struct {
	kind   string // "token" or "basic"
	user   string
	hash   [32]byte // SHA-256 of the secret
	bcrypt []byte   // or the secret's bcrypt hash
	tenant string
}

// maxAccepted bounds Auth.accepted; past it the memory starts over.
const maxAccepted = 4096

// ParseAuth reads an auth file.
func ParseAuth(r io.Reader) (*Auth, error) {
	a := &Auth{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		var c credential
		var secret string
		switch {
		case f[0] == "token" && (len(f) == 2 || len(f) == 3):
			c.kind, secret = "token", f[1]
			if len(f) == 3 {
				c.tenant = f[2]
			}
		case f[0] == "basic" && (len(f) == 3 || len(f) == 4):
			c.kind, c.user, secret = "basic", f[1], f[2]
			if len(f) == 4 {
				c.tenant = f[3]
			}
		default:
			return nil, fmt.Errorf("auth file line %d: want \"token <secret> [tenant]\" or \"basic <user> <password> [tenant]\"", n)
		}
		if c.tenant != "" && !validTenant(c.tenant) {
			return nil, fmt.Errorf("auth file line %d: invalid tenant %q", n, c.tenant)
		}
		if isBcrypt(secret) {
			if _, err := bcrypt.Cost([]byte(secret)); err != nil {
				return nil, fmt.Errorf("auth file line %d: bad bcrypt hash: %v", n, err)
			}
			c.bcrypt = []byte(secret)
		} else if h, ok := strings.CutPrefix(secret, "sha256:"); ok {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("auth file line %d: sha256: wants 64 hex digits", n)
			}
			copy(c.hash[:], b)
		} else {
			c.hash = sha256.Sum256([]byte(secret))
		}
		a.creds = append(a.creds, c)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(a.creds) == 0 {
		return nil, fmt.Errorf("auth file has no credentials")
	}
	return a, nil
}

// check returns the credential the request presents, if valid. Every
// credential is compared, so timing does not tell which one nearly matched.
func (a *Auth) check(r *http.Request) (*credential, bool) {
	var kind, user, secret string
	if u, p, ok := r.BasicAuth(); ok {
		kind, user, secret = "basic", u, p
	} else if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		kind, secret = "token", strings.TrimSpace(t)
	} else {
		return nil, false
	}
	h := sha256.Sum256([]byte(secret))
	var found *credential
	for i := range a.creds {
		c := &a.creds[i]
		if c.bcrypt != nil {
			continue
		}
		eq := subtle.ConstantTimeCompare(h[:], c.hash[:]) == 1
		if eq && c.kind == kind && c.user == user && found == nil {
			found = c
		}
	}
	if found != nil {
		return found, true
	}
	for i := range a.creds {
		c := &a.creds[i]
		if c.bcrypt != nil && c.kind == kind && c.user == user && a.bcryptOK(c, secret) {
			return c, true
		}
	}
	return nil, false
}

// bcryptOK checks secret against c's bcrypt hash, remembering a success.
func (a *Auth) bcryptOK(c *credential, secret string) bool {
	key := sha256.Sum256([]byte(c.kind + "\x00" + c.user + "\x00" + secret + "\x00" + string(c.bcrypt)))
	a.mu.Lock()
	ok := a.accepted[key]
	a.mu.Unlock()
	if ok {
		return true
	}
	if bcrypt.CompareHashAndPassword(c.bcrypt, []byte(secret)) != nil {
		return false
	}
	a.mu.Lock()
	if a.accepted == nil || len(a.accepted) >= maxAccepted {
		a.accepted = map[[32]byte]bool{}
	}
	a.accepted[key] = true
	a.mu.Unlock()
	return true
}

// isBcrypt reports whether secret is written as a bcrypt hash.
func isBcrypt(secret string) bool {
	return strings.HasPrefix(secret, "$2a$") || strings.HasPrefix(secret, "$2b$") || strings.HasPrefix(secret, "$2y$")
}

// validTenant reports whether id is a tenant id: [A-Za-z0-9_.-]{1,64},
// not "." or "..", so it is always one safe directory name.
func validTenant(id string) bool {
	if len(id) == 0 || len(id) > 64 || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c == '_' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			continue
		}
		return false
	}
	return true
}

type tenantKey struct{}

// auth authenticates the request (when an auth file is configured) and
// resolves its tenant, which handlers read with s.tenant.
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		org := r.Header.Get("X-Scope-OrgID")
		tenant := org
		if s.cfg.Auth != nil {
			c, ok := s.cfg.Auth.check(r)
			if !ok {
				s.met.rejected.WithLabelValues("unauthorized").Inc()
				w.Header().Set("WWW-Authenticate", `Basic realm="haystack"`)
				writeError(w, http.StatusUnauthorized, "missing or invalid credentials")
				return
			}
			if c.tenant != "" {
				if org != "" && org != c.tenant {
					s.met.rejected.WithLabelValues("forbidden_tenant").Inc()
					writeError(w, http.StatusForbidden, fmt.Sprintf("these credentials may not use tenant %q", org))
					return
				}
				tenant = c.tenant
			}
		}
		if tenant == "" {
			tenant = DefaultTenant
		}
		if !validTenant(tenant) {
			s.met.rejected.WithLabelValues("bad_tenant").Inc()
			writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid X-Scope-OrgID %q: want 1 to 64 of [A-Za-z0-9_.-], not . or ..", tenant))
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}

// tenant is the request's tenant as resolved by auth.
func (s *Server) tenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	t, ok := r.Context().Value(tenantKey{}).(string)
	if !ok {
		writeError(w, http.StatusInternalServerError, "no tenant")
	}
	return t, ok
}
