package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// followCert makes a self-signed certificate for 127.0.0.1.
func followCert(t *testing.T, cn string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, c
}

// runFollow runs rs.follow against srv for at most d, and returns what it
// printed, its error, stderr and whether it was still running at d.
func runFollow(t *testing.T, rs *remoteSearch, srvURL string, d time.Duration) (out, stderr string, timedOut bool, err error) {
	t.Helper()
	base, perr := url.Parse(srvURL)
	if perr != nil {
		t.Fatal(perr)
	}
	var buf strings.Builder
	bw := bufio.NewWriter(&buf)
	p := &printer{w: bw}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stderr = captureStderr(t, func() { _, err = rs.follow(ctx, base, url.Values{"q": {"o"}, "text": {"1"}}, p) })
	bw.Flush()
	return buf.String(), stderr, ctx.Err() != nil, err
}

// TestFollowCertificateChangeEnds: after a restart the server presents a
// certificate this machine does not trust. That does not go away by
// itself: the follow ends with the certificate error (was: "still
// reconnecting", until Ctrl-C).
func TestFollowCertificateChangeEnds(t *testing.T) {
	certA, a := followCert(t, "A")
	certB, _ := followCert(t, "B")
	var cur atomic.Pointer[tls.Certificate]
	cur.Store(&certA)
	t0 := time.Now().UnixNano()
	var tails atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		switch r.URL.Path {
		case "/api/v1/tail":
			tails.Add(1)
			sseStart(w)
			sseEntry(w, fakeEntry{t0, "one"})
			cur.Store(&certB) // the server restarts with another certificate
		case "/api/v1/search":
			serveFakeSearch(w, r, []fakeEntry{{t0, "one"}})
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failures
	srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*cur.Load()}}, nil
	}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(a)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	out, stderr, timedOut, err := runFollow(t, &remoteSearch{client: client}, srv.URL, 3*time.Second)
	if timedOut {
		t.Fatalf("still retrying after 3 s of certificate failures (err %v); stderr:\n%s", err, stderr)
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("follow ended with %v, want the certificate error; stderr:\n%s", err, stderr)
	}
	if out != "one\n" || tails.Load() != 1 || strings.Contains(stderr, "still reconnecting") {
		t.Fatalf("printed %q after %d tails; stderr:\n%s", out, tails.Load(), stderr)
	}
}

// TestFollowRedirectLoopEnds: a server that answers the reconnection with
// a redirect loop ends the follow with the client's error.
func TestFollowRedirectLoopEnds(t *testing.T) {
	t0 := time.Now().UnixNano()
	var tails atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tail":
			if tails.Add(1) == 1 {
				sseStart(w)
				sseEntry(w, fakeEntry{t0, "one"})
				return
			}
			http.Redirect(w, r, r.URL.String(), http.StatusFound)
		case "/api/v1/search":
			serveFakeSearch(w, r, []fakeEntry{{t0, "one"}})
		}
	}))
	t.Cleanup(srv.Close)
	out, stderr, timedOut, err := runFollow(t, &remoteSearch{client: srv.Client()}, srv.URL, 3*time.Second)
	if timedOut || err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("follow ended with %v (timed out: %v), want the redirect error; stderr:\n%s", err, timedOut, stderr)
	}
	if out != "one\n" || tails.Load() != 11 { // the first; the reconnection and 9 redirects, then the client stops
		t.Fatalf("printed %q after %d tail requests; stderr:\n%s", out, tails.Load(), stderr)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestTransientRequestErrors: the errors of a request without an answer
// that a follow retries (the network's) and those that end it.
func TestTransientRequestErrors(t *testing.T) {
	ue := func(err error) error { return &url.Error{Op: "Get", URL: "https://x/api/v1/tail", Err: err} }
	_, leaf := followCert(t, "leaf")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{ue(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), true},
		{ue(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), true},
		{ue(syscall.ECONNRESET), true},
		{ue(io.EOF), true},
		{ue(io.ErrUnexpectedEOF), true},
		{ue(timeoutErr{}), true},
		{ue(&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}), true},
		{ue(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{Cert: leaf}}), false},
		{ue(x509.UnknownAuthorityError{Cert: leaf}), false},
		{ue(x509.HostnameError{Certificate: leaf, Host: "y"}), false},
		{ue(x509.CertificateInvalidError{Cert: leaf, Reason: x509.Expired}), false},
		{ue(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), false},
		{ue(&net.OpError{Op: "remote error", Err: tls.AlertError(42)}), false},
		{ue(errors.New("stopped after 10 redirects")), false},
		{ue(errors.New("http: server gave HTTP response to HTTPS client")), false},
		{ue(context.Canceled), false},
		{fmt.Errorf("page 3: %w", ue(io.EOF)), true},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestFollowClockAheadGap: this machine's clock is 3 minutes ahead of the
// server's, which stamps the entries. A tail that ends before it showed
// anything is followed by a search from a minute before the tail began by
// the server's clock (its Date header), so the entry stored meanwhile is
// shown (was: searched from this machine's clock, and lost).
func TestFollowClockAheadGap(t *testing.T) {
	for _, skew := range []time.Duration{3 * time.Minute, -3 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			var tails, searches atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				serverNow := time.Now().Add(-skew)
				w.Header().Set("Date", serverNow.UTC().Format(http.TimeFormat))
				switch r.URL.Path {
				case "/api/v1/tail":
					n := tails.Add(1) // (before the answer: the follow may end at once)
					sseStart(w)
					if n == 1 {
						return // quiet, then the server restarts
					}
					<-r.Context().Done()
				case "/api/v1/search":
					searches.Add(1)
					serveFakeSearch(w, r, []fakeEntry{{serverNow.Add(-time.Second).UnixNano(), "stored meanwhile"}})
				}
			}))
			t.Cleanup(srv.Close)
			rs := &remoteSearch{client: srv.Client()}
			rs.q.Limit = 1
			out, stderr, timedOut, err := runFollow(t, rs, srv.URL, 3*time.Second)
			if out != "stored meanwhile\n" || timedOut || !errors.Is(err, errFollowLimit) {
				t.Fatalf("follow (err %v, timed out %v) printed %q, want the entry stored during the gap; stderr:\n%s", err, timedOut, out, stderr)
			}
			if tails.Load() != 2 || searches.Load() != 1 || strings.Contains(stderr, "clock") {
				t.Fatalf("%d tails, %d searches; stderr:\n%s", tails.Load(), searches.Load(), stderr)
			}
		})
	}
}

// TestTailGapLearnClock: the server's clock from a Date header, erring
// to the past; an answer without one keeps what was learned.
func TestTailGapLearnClock(t *testing.T) {
	g := newTailGap(0)
	local := time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC).UnixNano()
	resp := &http.Response{Header: http.Header{"Date": {"Mon, 30 Nov 2026 21:57:00 GMT"}}}
	g.learnClock(resp, local)
	if g.offset != -int64(3*time.Minute) {
		t.Fatalf("offset %v, want -3m", time.Duration(g.offset))
	}
	g.learnClock(&http.Response{Header: http.Header{}}, local)
	g.learnClock(&http.Response{Header: http.Header{"Date": {"yesterday"}}}, local)
	if g.offset != -int64(3*time.Minute) {
		t.Fatalf("offset %v after answers without a Date, want -3m kept", time.Duration(g.offset))
	}
	server := g.now()
	if d := time.Now().UnixNano() - int64(3*time.Minute) - server; d < 0 || d > int64(time.Second) {
		t.Fatalf("now is %v off the server's clock", time.Duration(d))
	}
}

// nginx502 is nginx's page for a 502, with a request id so that every
// answer differs, as some proxies' pages do.
func nginx502(id int32) string {
	return fmt.Sprintf("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.24.0 request %d</center>\r\n</body>\r\n</html>\r\n", id)
}

// TestFollowProxyHTMLMessage: a proxy's HTML error pages (each with its
// own request id) give one short "still reconnecting" line with the
// status, not the page at every attempt.
func TestFollowProxyHTMLMessage(t *testing.T) {
	var tails atomic.Int32
	t0 := time.Now().UnixNano()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tail":
			switch n := tails.Add(1); n {
			case 1:
				sseStart(w)
				sseEntry(w, fakeEntry{t0, "one"})
			case 2, 3:
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				io.WriteString(w, nginx502(n))
			default:
				sseStart(w)
				sseEntry(w, fakeEntry{t0 + 1, "two"})
				<-r.Context().Done()
			}
		case "/api/v1/search":
			serveFakeSearch(w, r, []fakeEntry{{t0, "one"}})
		}
	}))
	t.Cleanup(srv.Close)
	out, code, stderr := hayInProcessStderr(t, "search", "--server", srv.URL, "-f", "--no-stream", "--limit", "2", "o")
	if code != 0 || string(out) != "one\ntwo\n" {
		t.Fatalf("exit %d, output %q; stderr:\n%s", code, out, stderr)
	}
	want := "hay search: still reconnecting: " + srv.URL + ": 502 Bad Gateway\n"
	if strings.Count(stderr, "still reconnecting") != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("stderr does not have the line %q once:\n%s", want, stderr)
	}
}

// TestPlainSummary: what is kept of an answer that is not hay serve's.
func TestPlainSummary(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	for _, tc := range []struct{ body, want string }{
		{"", ""},
		{"upstream connect error\r\nor disconnect\n", "upstream connect error or disconnect"},
		{nginx502(7), "502 Bad Gateway"},
		{"<!DOCTYPE html><HTML><HEAD><TITLE>Service &amp; Co</TITLE></HEAD></HTML>", "Service & Co"},
		{"<html><head><title> </title></head><body><h1>Bad</h1>\n<p>gate &lt;way&gt;</p></body></html>", "Bad gate <way>"},
		{"<p>no end", "no end"},
		{"<", ""},
		{long, strings.Repeat("é", 100) + "..."},
		{"x" + long, "x" + strings.Repeat("é", 99) + "..."}, // not cut inside a rune
		{"<title>" + long + "</title>", strings.Repeat("é", 100) + "..."},
		{strings.Repeat("a", maxSummary), strings.Repeat("a", maxSummary)},
	} {
		if got := plainSummary([]byte(tc.body)); got != tc.want {
			t.Errorf("plainSummary(%.40q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

// TestFollowDroppedSearched: entries the server dropped for the new tail
// while the gap's search ran are stored: after the drop notice a search
// shows them, without repeating what was shown, and the tail's later
// repeat of an entry the gap's search showed is still recognised.
func TestFollowDroppedSearched(t *testing.T) {
	t0 := time.Now().Add(-2 * time.Second).UnixNano()
	var tails, searches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tail":
			n := tails.Add(1)
			sseStart(w)
			if n == 1 {
				sseEntry(w, fakeEntry{t0, "one"})
				return // lost
			}
			for searches.Load() < 1 && r.Context().Err() == nil { // the gap's search ran
				time.Sleep(5 * time.Millisecond)
			}
			fmt.Fprint(w, "data: {\"dropped\":1}\n\n") // "three"
			w.(http.Flusher).Flush()
			for searches.Load() < 2 && r.Context().Err() == nil { // the search for the dropped entries ran
				time.Sleep(5 * time.Millisecond)
			}
			sseEntry(w, fakeEntry{t0 + 1, "two"}) // stored after the tail connected
			sseEntry(w, fakeEntry{t0 + 3, "four"})
			<-r.Context().Done()
		case "/api/v1/search":
			entries := []fakeEntry{{t0, "one"}, {t0 + 1, "two"}}
			if searches.Add(1) > 1 {
				entries = append(entries, fakeEntry{t0 + 2, "three"})
			}
			serveFakeSearch(w, r, entries)
		}
	}))
	t.Cleanup(srv.Close)
	rs := &remoteSearch{client: srv.Client()}
	rs.q.Limit = 4
	out, stderr, timedOut, err := runFollow(t, rs, srv.URL, 3*time.Second)
	if out != "one\ntwo\nthree\nfour\n" || timedOut || !errors.Is(err, errFollowLimit) {
		t.Fatalf("follow (err %v, timed out %v) printed %q; stderr:\n%s", err, timedOut, out, stderr)
	}
	if tails.Load() != 2 || searches.Load() != 2 || !strings.Contains(stderr, "the server dropped 1 entries this tail did not read in time; searching for them\n") {
		t.Fatalf("%d tails, %d searches; stderr:\n%s", tails.Load(), searches.Load(), stderr)
	}
}
