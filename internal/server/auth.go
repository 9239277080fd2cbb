package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

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
// one without may name any tenant in X-Scope-OrgID (default "fake"). A
// user, or a token secret, may appear on one line only.
//
// Guessing is slowed down: failed logins are counted per client address
// (FailuresPerMinute, with a burst of FailureBurst), and an address past
// its allowance gets 429 without its credentials being checked; a failed
// login is logged (once a minute per address). Behind a proxy every client
// shares the proxy's address, so the proxy should do the limiting, with
// FailuresPerMinute negative here. bcrypt checks run at most
// GOMAXPROCS/2 at a time, so guesses cannot take every core from the
// queries; a basic user without a bcrypt hash costs a bcrypt check too
// when the file has any, so that timing does not tell which users exist.
type Auth struct {
	creds []credential

	// FailuresPerMinute is how many failed logins a client address may
	// make a minute once it has spent FailureBurst; 0 means
	// DefaultFailuresPerMinute, negative no limit.
	FailuresPerMinute int
	FailureBurst      int // 0: DefaultFailureBurst

	mu       sync.Mutex
	accepted map[[32]byte]bool // bcrypt checks passed, by SHA-256 of kind, user, secret and hash

	dummy   []byte        // a bcrypt hash of nothing known, at the file's highest cost
	slots   chan struct{} // bounds concurrent bcrypt checks
	limiter failLimiter
}

// The defaults of Auth's failed-login limit: an address that fails 20
// times in a row then gets one attempt every 6 s.
const (
	DefaultFailuresPerMinute = 10
	DefaultFailureBurst      = 20
)

// bcryptCompare is bcrypt.CompareHashAndPassword; tests count the calls.
var bcryptCompare = bcrypt.CompareHashAndPassword

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
	var lines []int // of a.creds
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
			if !wellFormedBcrypt(secret) {
				// bcrypt.Cost reads only the prefix: a hash with a
				// typo would be accepted and match no password.
				return nil, fmt.Errorf("auth file line %d: bad bcrypt hash: want 60 characters, $2y$NN$ then 53 of [./A-Za-z0-9]", n)
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
		if line, dup := duplicate(a.creds, lines, c); dup {
			what := "this token"
			if c.kind == "basic" {
				what = fmt.Sprintf("user %q", c.user)
			}
			return nil, fmt.Errorf("auth file line %d: %s is already on line %d (the first line would win: remove one)", n, what, line)
		}
		a.creds = append(a.creds, c)
		lines = append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(a.creds) == 0 {
		return nil, fmt.Errorf("auth file has no credentials")
	}
	cost := 0
	for _, c := range a.creds {
		if c.bcrypt != nil {
			n, _ := bcrypt.Cost(c.bcrypt) // checked above
			cost = max(cost, n)
		}
	}
	if cost > 0 {
		var err error
		if a.dummy, err = bcrypt.GenerateFromPassword([]byte("no user has this password \x00"), cost); err != nil {
			return nil, err
		}
	}
	a.slots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))
	return a, nil
}

// duplicate reports an earlier line that c repeats: the same basic user,
// or the same token secret (as far as it can tell: two bcrypt hashes of
// one secret differ). The first line would win, silently: a leftover line
// without a tenant would keep access to every tenant.
func duplicate(creds []credential, lines []int, c credential) (int, bool) {
	for i, o := range creds {
		switch {
		case c.kind == "basic" && o.kind == "basic" && c.user == o.user,
			c.kind == "token" && o.kind == "token" && c.bcrypt == nil && o.bcrypt == nil && c.hash == o.hash:
			return lines[i], true
		}
	}
	return 0, false
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
	checked := false
	for i := range a.creds {
		c := &a.creds[i]
		if c.bcrypt != nil && c.kind == kind && c.user == user {
			checked = true
			if a.bcryptOK(r, c, secret) {
				return c, true
			}
		}
	}
	if !checked && kind == "basic" && a.dummy != nil {
		// An unknown user (or one with a plain password) takes as
		// long as a known bcrypt user's wrong password: without this,
		// 0.04 ms against 0.4 s told which users exist.
		a.compare(r, a.dummy, secret)
	}
	return nil, false
}

// compare runs a bcrypt check in one of a.slots, so that guesses use at
// most half the cores; false, without a check, if the request ends while
// it waits.
func (a *Auth) compare(r *http.Request, hash []byte, secret string) bool {
	if a.slots == nil { // not made by ParseAuth
		return bcryptCompare(hash, []byte(secret)) == nil
	}
	select {
	case a.slots <- struct{}{}:
	case <-r.Context().Done():
		return false
	}
	defer func() { <-a.slots }()
	return bcryptCompare(hash, []byte(secret)) == nil
}

// bcryptOK checks secret against c's bcrypt hash, remembering a success.
func (a *Auth) bcryptOK(r *http.Request, c *credential, secret string) bool {
	key := sha256.Sum256([]byte(c.kind + "\x00" + c.user + "\x00" + secret + "\x00" + string(c.bcrypt)))
	a.mu.Lock()
	ok := a.accepted[key]
	a.mu.Unlock()
	if ok {
		return true
	}
	if !a.compare(r, c.bcrypt, secret) {
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

// wellFormedBcrypt reports whether h has a bcrypt hash's shape:
// $2a$NN$ and 53 characters of bcrypt's base64 (22 of salt, 31 of hash).
func wellFormedBcrypt(h string) bool {
	if len(h) != 60 || h[6] != '$' {
		return false
	}
	for i := 7; i < len(h); i++ {
		c := h[i]
		if c != '.' && c != '/' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
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
		if a := s.cfg.Auth; a != nil {
			addr := clientAddr(r)
			perMin, burst := a.failureLimit()
			// Only a credential sent counts: a browser's first requests
			// carry none until it asks. Each takes one of the address's
			// allowance before it is checked, given back if it passes
			// (or the client left while it waited for a bcrypt slot):
			// charged after the check, simultaneous guesses all got
			// through (review A1, A2).
			sent := r.Header.Get("Authorization") != ""
			if sent {
				if wait := a.limiter.take(addr, perMin, burst, time.Now()); wait > 0 {
					secs := int(math.Ceil(wait.Seconds()))
					s.met.rejected.WithLabelValues("login_limited").Inc()
					w.Header().Set("Retry-After", fmt.Sprint(secs))
					writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed logins from %s: retry in %d s", addr, secs))
					return
				}
			}
			c, ok := a.check(r)
			if sent {
				if ok || r.Context().Err() != nil {
					a.limiter.refund(addr, perMin, burst, time.Now())
				} else if a.limiter.logFailure(addr, time.Now()) {
					s.log.Warn("failed login (logged once a minute per address)", "remote", addr, "user", basicUser(r), "path", r.URL.Path)
				}
			}
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

// failureLimit is the failed-login allowance: per minute (0: none) and
// burst.
func (a *Auth) failureLimit() (perMinute float64, burst float64) {
	switch {
	case a.FailuresPerMinute < 0:
		return 0, 0
	case a.FailuresPerMinute == 0:
		perMinute = DefaultFailuresPerMinute
	default:
		perMinute = float64(a.FailuresPerMinute)
	}
	burst = DefaultFailureBurst
	if a.FailureBurst > 0 {
		burst = float64(a.FailureBurst)
	}
	return perMinute, burst
}

// clientAddr is the request's remote IP address (without the port); for
// IPv6 its /64, which one host usually has whole: keyed by full address,
// one host had endless fresh allowances (review A4).
func clientAddr(r *http.Request) string {
	h, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	if ip := net.ParseIP(h); ip != nil && ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return h
}

// basicUser is the user name of a basic credential, for the log.
func basicUser(r *http.Request) string {
	u, _, _ := r.BasicAuth()
	return u
}

// failLimiter counts failed logins per client address in token buckets.
type failLimiter struct {
	mu sync.Mutex
	m  map[string]*failBucket
}

type failBucket struct {
	tokens float64   // failures still allowed
	at     time.Time // when tokens was last brought up to date
	logged time.Time // the last failure logged
}

// maxFailAddrs bounds the addresses remembered; past it those back at a
// full allowance are forgotten, and if that is not enough, all.
const maxFailAddrs = 10000

// bucket returns addr's bucket brought up to now; l.mu is held.
func (l *failLimiter) bucket(addr string, perMinute, burst float64, now time.Time) *failBucket {
	b := l.m[addr]
	if b == nil {
		if len(l.m) >= maxFailAddrs {
			for k, o := range l.m {
				if o.tokens+now.Sub(o.at).Minutes()*perMinute >= burst {
					delete(l.m, k)
				}
			}
			if len(l.m) >= maxFailAddrs {
				l.m = nil
			}
		}
		if l.m == nil {
			l.m = map[string]*failBucket{}
		}
		b = &failBucket{tokens: burst, at: now}
		l.m[addr] = b
		return b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Minutes()*perMinute)
	b.at = now
	return b
}

// take spends one of addr's failed logins ahead of a check (refund gives
// it back if the check passes); a positive result is how long addr must
// wait instead, with nothing spent.
func (l *failLimiter) take(addr string, perMinute, burst float64, now time.Time) time.Duration {
	if perMinute <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(addr, perMinute, burst, now)
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / perMinute * float64(time.Minute))
	}
	b.tokens--
	return 0
}

// refund gives back what take spent for a login that passed.
func (l *failLimiter) refund(addr string, perMinute, burst float64, now time.Time) {
	if perMinute <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(addr, perMinute, burst, now)
	b.tokens = min(burst, b.tokens+1)
}

// logFailure reports whether to log a failed login from addr: the first,
// then at most once a minute.
func (l *failLimiter) logFailure(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[addr] // take made it, unless there is no limit
	if b == nil {
		// No limit: a bucket only for the log, whose allowance is
		// unused (a big one, so that it counts as full when the table
		// is trimmed).
		b = l.bucket(addr, 1, math.MaxInt32, now)
	}
	if now.Sub(b.logged) >= time.Minute {
		b.logged = now
		return true
	}
	return false
}
