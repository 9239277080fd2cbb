package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"html"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
	"haystack/internal/search"
)

// remoteSearch is hay search --server: the same search run by a hay
// serve, through the API its web UI uses (internal/server/web/API.md):
// /api/v1/search for the entries, read page by page, and /api/v1/hits for
// -c. An engineer on a laptop can then grep the central store as if it
// were local.
type remoteSearch struct {
	base   string // the server's URL
	tenant string // X-Scope-OrgID; "" for the server's default
	token  string // a bearer token; "" for none (or the URL's user:password)
	src    string // --query; "" for a PATTERN in q
	q      search.Query

	client  *http.Client
	streams remoteStreams // the label sets seen, as stream ids for the printer
}

// remotePage is how many entries one request asks for. The server caps
// a request's limit (--max-query-limit, 5000 by default); a smaller page
// only costs more requests.
const remotePage = 5000

// maxRemoteSkip is the API's bound on skip: more entries than that at one
// timestamp cannot be paged past.
const maxRemoteSkip = 100_000

// remoteLine is one line of /api/v1/search's NDJSON answer: an entry, or
// the trailer (done, or error).
type remoteLine struct {
	Ts         string            `json:"ts"`
	Labels     map[string]string `json:"labels"`
	Line       string            `json:"line"`
	LineBase64 []byte            `json:"line_base64"`
	Metadata   map[string]string `json:"metadata"`
	Done       bool              `json:"done"`
	Limited    bool              `json:"limited"`
	Error      string            `json:"error"`
	Dropped    int64             `json:"dropped"` // the tail's: entries it lost
	Reason     string            `json:"reason"`  // the tail's: why it ends ("shutting_down")
}

// run searches and prints as a local search does; the flags are those
// searchCommand accepts with --server. With follow it prints the entries
// that arrive from now on instead, until Ctrl-C (or --limit).
func (rs *remoteSearch) run(asJSON, withStream, noStream bool, colorMode string, quiet, follow bool) error {
	u, err := url.Parse(rs.base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --server wants a URL such as http://host:3100, not %q", errUsage, rs.base)
	}
	if rs.client == nil {
		rs.client = &http.Client{}
	}
	if rs.token != "" && u.User != nil {
		// The URL's user and password are the ones this command names.
		fmt.Fprintln(os.Stderr, "hay search: the URL has a user and password: HAY_TOKEN is not sent")
		rs.token = ""
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	params := url.Values{}
	if rs.src != "" {
		params.Set("q", rs.src)
	} else {
		// text=1: a literal that starts with "{" (a JSON line) is still
		// a literal, as hay search PATTERN is.
		params.Set("q", string(rs.q.Pattern))
		params.Set("text", "1")
		if rs.q.Fold {
			params.Set("fold", "1")
		}
	}
	// The API's bounds are inclusive and its end defaults to now; a local
	// search has no end unless --until, which is exclusive. Bounds also
	// handles an --until at the earliest time (no entry).
	start, end := rs.q.Bounds()
	if start > end {
		if rs.q.Count {
			fmt.Println(0)
		}
		return errNoMatch
	}
	if start != math.MinInt64 {
		params.Set("start", strconv.FormatInt(start, 10))
	}
	params.Set("end", strconv.FormatInt(end, 10))

	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	p := printer{w: out, tty: isTerminal(os.Stdout), json: asJSON, quiet: quiet, labelsOf: rs.streams.labels}
	if asJSON && rs.q.Plan != nil && labelStages(rs.q.Plan) && !rs.q.Plan.RewritesLine() {
		// The labels a local search adds, from the same pipeline run
		// here on the stored line, stream labels and metadata the
		// server sends. A line the server rewrote cannot be parsed again:
		// such a query prints the stored fields alone.
		p.pipe = newJSONPipeline(rs.q.Plan, rs.streams.labels)
	}
	// A server holds many streams: on a terminal, name them.
	p.prefix = !asJSON && !noStream && (withStream || p.tty)
	if !asJSON && !quiet && useColor(colorMode, p.tty) {
		p.color = true
		p.hl = newHighlighter(rs.q.Pattern, rs.q.Fold, rs.q.Plan)
	}
	var n int64
	switch {
	case follow:
		params.Del("start")
		params.Del("end")
		n, err = rs.follow(ctx, u, params, &p)
	case rs.q.Count:
		n, err = rs.count(ctx, u, params)
		if rs.q.Limit > 0 {
			n = min(n, rs.q.Limit) // as a local -c -m N
		}
		if err == nil {
			fmt.Fprintln(out, n)
		}
	default:
		n, err = rs.entries(ctx, u, params, &p, quiet)
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	switch {
	case ctx.Err() != nil:
		return &exitError{code: 130, err: errors.New("interrupted")}
	case errors.Is(err, errFollowLimit):
		return nil
	case err != nil:
		return err
	case n == 0:
		return errNoMatch
	}
	return nil
}

// get sends GET base+path?params and returns the response when its status
// is 200, else an error with the server's message.
func (rs *remoteSearch) get(ctx context.Context, base *url.URL, path string, params url.Values) (*http.Response, error) {
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if rs.tenant != "" {
		req.Header.Set("X-Scope-OrgID", rs.tenant)
	}
	if rs.token != "" {
		req.Header.Set("Authorization", "Bearer "+rs.token)
	}
	var resp *http.Response
	for try := 0; ; try++ {
		resp, err = rs.client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		// A busy server (its query slots, or a restart) asks to retry:
		// a search half way through its pages waits rather than stop.
		wait, werr := strconv.Atoi(resp.Header.Get("Retry-After"))
		busy := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
		if !busy || werr != nil || wait < 0 || wait > 30 || try == 5 {
			break
		}
		resp.Body.Close()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(max(wait, 1)) * time.Second):
		}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	var msg string
	if json.Unmarshal(body, &e) == nil && (e.Message != "" || e.Error != "") {
		msg = cmp.Or(e.Message, e.Error)
	} else {
		// Not hay serve's answer: most often a proxy's page (HTML),
		// which may differ at every request (a request id, a time).
		msg = plainSummary(body)
	}
	msg = string(appendEscaped(nil, []byte(msg))) // the server's text, for a terminal
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		msg += " (set HAY_TOKEN, or put user:password in the URL)"
	case http.StatusNotFound:
		msg += " (is " + base.Redacted() + " a hay serve?)"
	}
	text := fmt.Sprintf("%s: %s", base.Redacted(), resp.Status)
	if msg != "" && !strings.EqualFold(msg, strings.TrimSpace(resp.Status)) {
		text += ": " + msg
	}
	se := &statusError{code: resp.StatusCode, msg: text}
	if wait, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && wait > 0 {
		se.retryAfter = time.Duration(min(wait, 300)) * time.Second
	}
	return nil, se
}

// statusError is an answer of the server other than 200, so that a
// follow can tell a server that is restarting (or a proxy in front of it)
// from one that refuses the request.
type statusError struct {
	code       int
	retryAfter time.Duration // the Retry-After header, if any
	msg        string
}

func (e *statusError) Error() string { return e.msg }

// maxSummary bounds the text kept of an answer that is not hay serve's
// JSON error, for one line of stderr.
const maxSummary = 200

// plainSummary is a short, one-line text for the body of an answer that
// is not hay serve's: the title of an HTML page (a proxy's "502 Bad
// Gateway"), else its text without markup; white space collapsed, at
// most maxSummary bytes (cut at a rune boundary, "..." added).
func plainSummary(body []byte) string {
	s := strings.TrimSpace(string(body))
	if strings.HasPrefix(s, "<") {
		s = htmlText(s)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxSummary {
		i := maxSummary
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "..."
	}
	return s
}

// htmlText is the <title> of an HTML page, or when it has none its text
// without the tags.
func htmlText(page string) string {
	lower := strings.ToLower(page) // (ASCII tags: the offsets hold)
	if i := strings.Index(lower, "<title>"); i >= 0 && len(lower) == len(page) {
		if j := strings.Index(lower[i:], "</title>"); j >= 0 {
			if title := strings.TrimSpace(html.UnescapeString(page[i+len("<title>") : i+j])); title != "" {
				return title
			}
		}
	}
	var b strings.Builder
	in := false
	for _, r := range page {
		switch {
		case r == '<':
			in = true
			b.WriteByte(' ')
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return html.UnescapeString(b.String())
}

// transient reports whether err may go away by itself: the connection
// failed or was cut (the server is down, restarting, or the network), or
// the server or a proxy said it is unavailable for now (429, 502, 503
// while hay serve drains, 504). A refusal (400, 401, 403, 404, ...) is
// not.
func transient(err error) bool {
	if errors.Is(err, errAnswerCut) {
		return true
	}
	var se *statusError
	if errors.As(err, &se) {
		switch se.code {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	ue, ok := errors.AsType[*url.Error](err)
	if !ok || errors.Is(err, context.Canceled) {
		return false
	}
	// The request failed before an answer. A certificate this machine
	// does not trust (changed, expired, another host), TLS spoken to a
	// plain HTTP server, a redirect loop or a bad URL will not go away
	// by itself: like a 401, they end the follow.
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return false
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return false
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return false
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return false
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return false
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return false // the server refused this machine's TLS (a client certificate?)
	}
	// What is left transient is the network's: refused, reset, timed
	// out, a name not found (a server moving), a connection cut (EOF).
	if _, ok := errors.AsType[net.Error](ue.Err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// count asks /api/v1/hits for the number of matching entries.
func (rs *remoteSearch) count(ctx context.Context, base *url.URL, params url.Values) (int64, error) {
	resp, err := rs.get(ctx, base, "/api/v1/hits", params)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var h struct {
		Total *int64 `json:"total"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Total == nil {
		return 0, fmt.Errorf("%s: the hits answer has no total (%v)", base.Redacted(), err)
	}
	return *h.Total, nil
}

// entries pages through /api/v1/search and prints every entry, until the
// server has no more or the limit is reached. A page after the first
// starts at the last time shown and skips the entries already shown at
// that time (the API's skip), so entries that share a timestamp are
// neither lost nor repeated.
func (rs *remoteSearch) entries(ctx context.Context, base *url.URL, params url.Values, p *printer, quiet bool) (int64, error) {
	direction := "forward"
	if rs.q.Order == search.Newest {
		direction = "backward"
	}
	params.Set("direction", direction)
	params.Set("labels", "stream") // as a local search names them
	var n int64
	var last int64 // the time of the last entry shown
	var atLast int // how many entries shown at that time
	for {
		page := remotePage
		if rs.q.Limit > 0 {
			page = int(min(int64(page), rs.q.Limit-n))
		}
		params.Set("limit", strconv.Itoa(page))
		if n > 0 {
			if atLast > maxRemoteSkip {
				return n, fmt.Errorf("more than %d entries share the time %s: the server's API cannot page past them", maxRemoteSkip, time.Unix(0, last).UTC().Format(time.RFC3339Nano))
			}
			bound := strconv.FormatInt(last, 10)
			if direction == "forward" {
				params.Set("start", bound)
			} else {
				params.Set("end", bound)
			}
			params.Set("skip", strconv.Itoa(atLast))
		}
		resp, err := rs.get(ctx, base, "/api/v1/search", params)
		if err != nil {
			return n, err
		}
		got, limited, err := rs.readPage(resp, p, &last, &atLast)
		resp.Body.Close()
		n += got
		switch {
		case err != nil:
			return n, err
		case !limited || got == 0:
			return n, nil
		case rs.q.Limit > 0 && n >= rs.q.Limit:
			return n, nil
		case quiet:
			return n, nil // one match answers -q
		}
	}
}

// readPage prints one page's entries and returns how many there were and
// whether the server stopped at the page's limit.
func (rs *remoteSearch) readPage(resp *http.Response, p *printer, last *int64, atLast *int) (int64, bool, error) {
	var n int64
	limited, err := readEntries(resp.Body, func(l *remoteLine) error {
		m, err := rs.match(l)
		if err != nil {
			return err
		}
		if *atLast > 0 && m.Time == *last {
			*atLast++
		} else {
			*last, *atLast = m.Time, 1
		}
		if err := p.print(&m); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, limited, err
}

// match is the entry an answer's line (or a tail's event) holds, its
// label set given a stream id for the printer.
func (rs *remoteSearch) match(l *remoteLine) (search.Match, error) {
	ts, err := strconv.ParseInt(l.Ts, 10, 64)
	if err != nil {
		return search.Match{}, fmt.Errorf("an entry from the server has a bad ts %q", l.Ts)
	}
	line := []byte(l.Line)
	if l.LineBase64 != nil {
		line = l.LineBase64 // the exact bytes of a line that is not UTF-8
	}
	m := search.Match{Time: ts, Stream: rs.streams.id(l.Labels), Line: line}
	if len(l.Metadata) > 0 {
		ps := make([]attrs.Pair, 0, len(l.Metadata))
		for k, v := range l.Metadata {
			ps = append(ps, attrs.Pair{Name: k, Value: v})
		}
		if m.Attrs, err = attrs.Encode(nil, ps); err != nil {
			return search.Match{}, fmt.Errorf("an entry from the server has bad metadata: %w", err)
		}
	}
	return m, nil
}

// remoteStreams numbers the label sets a remote search meets, so that the
// printer can treat them as a local search's streams.
type remoteStreams struct {
	names []string          // id -> canonical labels
	ids   map[string]uint32 // canonical labels -> id
}

// id returns the id standing for labels, numbering them the first time.
func (s *remoteStreams) id(labels map[string]string) uint32 {
	ls := make(ingest.Labels, 0, len(labels))
	for k, v := range labels {
		ls = append(ls, ingest.Label{Name: k, Value: v})
	}
	slices.SortFunc(ls, func(a, b ingest.Label) int { return strings.Compare(a.Name, b.Name) })
	key := ls.String()
	id, ok := s.ids[key]
	if !ok {
		if s.ids == nil {
			s.ids = map[string]uint32{}
		}
		id = uint32(len(s.names))
		s.ids[key] = id
		s.names = append(s.names, key)
	}
	return id
}

// labels returns the canonical labels of id.
func (s *remoteStreams) labels(id uint32) string { return s.names[id] }

// errFollowLimit ends a --follow that has printed --limit entries.
var errFollowLimit = errors.New("limit reached")

// follow reads the server's live tail (/api/v1/tail, server-sent events)
// and prints each entry as it arrives.
//
// A tail that is lost (the server restarts, gracefully or not; the
// network drops) is reconnected, and what arrived meanwhile is shown from
// a search: from a minute before the latest entry shown (see tailGap).
// Reconnecting waits (tailGap.backoff) unless the lost tail delivered
// something, so that a server or proxy that accepts a tail and ends it at
// once is not sent a tail and a search in a tight loop. While the server
// is down, drains before a restart (503), or a proxy in front of it
// answers 502, 503, 504 or 429, it keeps trying until Ctrl-C. A refusal
// (a bad query, credentials, 404, an untrusted certificate, a redirect
// loop), or a failure of the first connection, ends the command. Times
// are the server's (tailGap.offset); entries the server drops for a tail
// not read in time are shown from a search too (fillDropped).
func (rs *remoteSearch) follow(ctx context.Context, base *url.URL, params url.Values, p *printer) (int64, error) {
	params.Set("labels", "stream")
	params.Set("dropped", "1")
	var (
		n    int64
		gap  *tailGap      // made when the first tail connects
		lost bool          // a tail was lost and its gap is not filled yet
		wait time.Duration // before the next attempt
		told string        // the last reconnection failure said, not to repeat it
	)
	retry := func(err error) {
		wait = gap.backoff(err)
		msg, same := err.Error(), err.Error()
		if ue, ok := errors.AsType[*url.Error](err); ok {
			msg, same = ue.Err.Error(), ue.Err.Error() // without the long URL of the tail
		}
		if se, ok := errors.AsType[*statusError](err); ok {
			// A proxy's page may differ at every attempt (a request
			// id, a time): the status says whether anything changed.
			same = strconv.Itoa(se.code)
		}
		if same != told {
			fmt.Fprintf(os.Stderr, "hay search: still reconnecting: %s\n", msg)
			told = same
		}
	}
	for {
		if wait > 0 {
			if err := sleepCtx(ctx, wait); err != nil {
				return n, nil
			}
		}
		resp, err := rs.get(ctx, base, "/api/v1/tail", params)
		if err != nil {
			if !lost || ctx.Err() != nil {
				return n, err
			}
			if !transient(err) {
				if ue, ok := errors.AsType[*url.Error](err); ok {
					// A certificate, a redirect loop: name it
					// without the long URL of the tail.
					return n, fmt.Errorf("cannot reconnect to %s (retrying would not help): %w", base.Redacted(), ue.Err)
				}
				return n, err
			}
			retry(err)
			continue
		}
		if gap == nil {
			// Nothing shown yet: the first gap's search starts a
			// minute before this tail began, by the server's clock.
			gap = newTailGap(0)
			gap.learnClock(resp, time.Now().UnixNano())
			gap.latest = gap.now()
			gap.lostAt = gap.latest
		} else {
			gap.learnClock(resp, time.Now().UnixNano())
		}
		if lost {
			fmt.Fprintln(os.Stderr, "hay search: the live tail is back; what arrived meanwhile follows")
			got, err := rs.fillGap(ctx, base, params, p, gap, n)
			n += got
			if err != nil {
				resp.Body.Close()
				if ctx.Err() != nil || !transient(err) {
					return n, err
				}
				// Lost again during the search: what it showed is
				// remembered (gap.recent), the next search goes on.
				gap.lostAt = max(gap.lostAt, gap.latest)
				retry(err)
				continue
			}
			if rs.q.Limit > 0 && n >= rs.q.Limit {
				resp.Body.Close()
				return n, errFollowLimit
			}
			lost, told = false, ""
		}
		got, delivered, err := rs.readTail(ctx, base, params, resp, p, gap, n)
		resp.Body.Close()
		n += got
		if err == nil || ctx.Err() != nil {
			return n, nil
		}
		if !errors.Is(err, errTailLost) {
			return n, err
		}
		if err := p.w.Flush(); err != nil {
			return n, err
		}
		if errors.Is(err, errTailStopped) {
			fmt.Fprintln(os.Stderr, "hay search: the server is shutting down (a restart?); reconnecting (Ctrl-C to stop)")
		} else {
			fmt.Fprintln(os.Stderr, "hay search: lost the server's live tail; reconnecting (Ctrl-C to stop)")
		}
		lost = true
		gap.lostAt = gap.now()
		if delivered {
			// The tail worked: try again at once, and back off from
			// the start if that fails.
			gap.tries, wait = 0, 0
		} else {
			wait = gap.backoff(nil)
		}
	}
}

var (
	// errTailLost is a tail that ended without the server saying why:
	// the connection broke, or the server stopped.
	errTailLost = errors.New("the server ended the live tail (connection lost?)")
	// errTailStopped is a tail the server ended because it is shutting
	// down: most often a restart, so a loss, not an error.
	errTailStopped = fmt.Errorf("%w: the server is shutting down", errTailLost)
)

// tailStopping reports whether a tail's error event is the server's
// shutdown: its reason (from the server of this version on), or the
// message of the servers before.
func tailStopping(l *remoteLine) bool {
	return l.Reason == "shutting_down" || l.Error == "server shutting down"
}

// readTail prints the events of one tail connection until it ends;
// shown counts the entries printed before it, for --limit. delivered
// says whether the tail sent anything but its end (an entry, even one
// not printed again, or a drop notice). The entries the server dropped
// for this tail (it was not read in time: during a gap's search, or a
// slow terminal) are stored: a search shows them (fillDropped).
func (rs *remoteSearch) readTail(ctx context.Context, base *url.URL, params url.Values, resp *http.Response, p *printer, gap *tailGap, shown int64) (n int64, delivered bool, err error) {
	br := bufio.NewReaderSize(resp.Body, 256<<10)
	for {
		raw, err := br.ReadBytes('\n')
		if err != nil {
			if ctx.Err() != nil {
				return n, delivered, nil
			}
			return n, delivered, errTailLost
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(raw, "\r\n"), []byte("data: "))
		if !ok {
			continue // a comment (": ping"), or the blank line ending an event
		}
		var l remoteLine
		if jerr := json.Unmarshal(data, &l); jerr != nil {
			return n, delivered, fmt.Errorf("an event of the server's tail is not JSON: %v", jerr)
		}
		if l.Error != "" {
			if tailStopping(&l) {
				return n, delivered, errTailStopped
			}
			return n, delivered, fmt.Errorf("the server: %s", appendEscaped(nil, []byte(l.Error)))
		}
		delivered = true
		if l.Dropped > 0 {
			// The server's queue for this tail filled up: the entries
			// are stored, but not sent here. Search for them, as for a
			// gap, while the tail keeps what arrives meanwhile (or
			// drops it again, and says so).
			if err := p.w.Flush(); err != nil {
				return n, delivered, err
			}
			fmt.Fprintf(os.Stderr, "hay search: the server dropped %d entries this tail did not read in time; searching for them\n", l.Dropped)
			got, err := rs.fillDropped(ctx, base, params, p, gap, shown+n)
			n += got
			switch {
			case ctx.Err() != nil:
				return n, delivered, nil
			case err != nil && transient(err):
				return n, delivered, errTailLost // reconnect; the next gap's search shows them
			case err != nil:
				return n, delivered, err
			case rs.q.Limit > 0 && shown+n >= rs.q.Limit:
				return n, delivered, errFollowLimit
			}
			continue
		}
		m, err := rs.match(&l)
		if err != nil {
			return n, delivered, err
		}
		k := gap.key(&m)
		if gap.repeated(k) {
			continue // shown already, from the search that filled a gap
		}
		if err := p.print(&m); err != nil {
			return n, delivered, err
		}
		if err := p.w.Flush(); err != nil {
			return n, delivered, err
		}
		gap.shown(k, m.Time, gap.now())
		n++
		if rs.q.Limit > 0 && shown+n >= rs.q.Limit {
			return n, delivered, errFollowLimit
		}
	}
}

// fillGap prints, after a reconnection, the entries the server stored
// from gap.from() on (a search, oldest first, page by page) that were not
// shown; shown counts the entries printed before, for --limit. The new
// tail, connected before the search, may deliver some of them again: gap
// remembers them.
func (rs *remoteSearch) fillGap(ctx context.Context, base *url.URL, tail url.Values, p *printer, gap *tailGap, shown int64) (int64, error) {
	return rs.searchGap(ctx, base, tail, p, gap, shown, false)
}

// fillDropped prints, while a tail is connected, the entries the server
// stored from gap.from() on that were not shown: after it dropped entries
// for the tail. Unlike fillGap it keeps what the previous gap's search
// showed (the tail may still repeat those), and skips every entry shown.
func (rs *remoteSearch) fillDropped(ctx context.Context, base *url.URL, tail url.Values, p *printer, gap *tailGap, shown int64) (int64, error) {
	return rs.searchGap(ctx, base, tail, p, gap, shown, true)
}

// searchGap is fillGap, or with dropped fillDropped.
func (rs *remoteSearch) searchGap(ctx context.Context, base *url.URL, tail url.Values, p *printer, gap *tailGap, shown int64, dropped bool) (int64, error) {
	params := url.Values{}
	for _, k := range []string{"q", "text", "fold"} {
		if v := tail.Get(k); v != "" {
			params.Set(k, v)
		}
	}
	params.Set("labels", "stream")
	params.Set("direction", "forward")
	params.Set("end", strconv.FormatInt(math.MaxInt64, 10))
	from, skip := gap.from(), 0
	if !dropped && from > gap.lostAt {
		// gap.latest is bounded by the server's clock (as learned) when
		// shown, so only a clock set back since gets here: say what is
		// not searched.
		if err := p.w.Flush(); err != nil {
			return 0, err
		}
		fmt.Fprintf(os.Stderr, "hay search: the search for what arrived meanwhile starts at %s, after the tail was lost (%s; was the server's clock set back?): entries stamped in between are not shown\n",
			time.Unix(0, from).UTC().Format(time.RFC3339Nano), time.Unix(0, gap.lostAt).UTC().Format(time.RFC3339Nano))
	}
	// before counts the entries shown before this search, to skip
	// their occurrences: for a gap, those shown less those this search
	// shows (filled starts empty); for drops, a copy of recent, as
	// filled goes on with what the last gap's search showed.
	before := func(k uint64) int { return gap.recent[k] - gap.filled[k] }
	if dropped {
		gap.skipped = map[uint64]int{}
		shownBefore := maps.Clone(gap.recent)
		before = func(k uint64) int { return shownBefore[k] }
	} else {
		gap.startFill()
	}
	var n int64
	for {
		params.Set("start", strconv.FormatInt(from, 10))
		params.Set("skip", strconv.Itoa(skip))
		params.Set("limit", strconv.Itoa(remotePage))
		resp, err := rs.get(ctx, base, "/api/v1/search", params)
		if err != nil {
			return n, err
		}
		var got int
		limited, err := readEntries(resp.Body, func(l *remoteLine) error {
			m, err := rs.match(l)
			if err != nil {
				return err
			}
			got++
			if m.Time == from {
				skip++
			} else {
				from, skip = m.Time, 1
			}
			k := gap.key(&m)
			// Equal entries shown before the search: those counted
			// in gap.recent that this search did not show itself.
			if gap.skipped[k] < before(k) {
				gap.skipped[k]++
				return nil // shown before the tail broke
			}
			if err := p.print(&m); err != nil {
				return err
			}
			gap.fill(k)
			gap.shown(k, m.Time, gap.now())
			n++
			if rs.q.Limit > 0 && shown+n >= rs.q.Limit {
				return errFollowLimit
			}
			return nil
		})
		resp.Body.Close()
		switch {
		case errors.Is(err, errFollowLimit):
			return n, p.w.Flush()
		case err != nil:
			if ferr := p.w.Flush(); ferr != nil {
				return n, ferr
			}
			return n, err
		case !limited || got == 0:
			return n, p.w.Flush()
		case skip > maxRemoteSkip:
			return n, fmt.Errorf("more than %d entries share the time %s: the server's API cannot page past them", maxRemoteSkip, time.Unix(0, from).UTC().Format(time.RFC3339Nano))
		}
	}
}

// errAnswerCut is an answer that ended before its trailer: the connection
// was lost (a follow reconnects).
var errAnswerCut = errors.New("the server's answer ended before its trailer (connection lost?)")

// readEntries calls fn for each entry of a /api/v1/search answer and
// returns whether the server stopped at the page's limit.
func readEntries(body io.Reader, fn func(*remoteLine) error) (limited bool, err error) {
	br := bufio.NewReaderSize(body, 256<<10)
	for {
		raw, err := br.ReadBytes('\n')
		if err != nil && (len(bytes.TrimSpace(raw)) == 0 || !json.Valid(raw)) {
			// The trailer is the last line; a body without it, or
			// that ends inside a line, was cut.
			return false, errAnswerCut
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var l remoteLine
		if jerr := json.Unmarshal(raw, &l); jerr != nil {
			return false, fmt.Errorf("a line of the server's answer is not JSON: %v", jerr)
		}
		switch {
		case l.Error != "":
			return false, fmt.Errorf("the server: %s", appendEscaped(nil, []byte(l.Error)))
		case l.Done:
			return l.Limited, nil
		}
		if err := fn(&l); err != nil {
			return false, err
		}
	}
}

// tailGap is what a followed tail remembers to fill a gap exactly. A
// gap's search starts tailWindow before the latest time shown, since
// entries arrive a little out of time order (shippers batch, clocks
// differ), and skips the entries shown already; the new tail may then
// deliver again entries the search showed, and those are skipped too.
// Entries are known by a hash of time, stream, line and metadata; entries
// equal in all four are told apart by count. An entry that arrives during
// a gap stamped more than tailWindow before the latest time shown is not
// found.
//
// The latest time shown counts an entry stamped in the future (a
// shipper's clock ahead: the server accepts up to --reject-newer-than) as
// shown now: else the next gap's search would start past the break and
// miss everything stored during it.
//
// Times are the server's: entries are stamped by it (or by shippers near
// it), and this machine's clock may be minutes off. "Now" is this
// machine's clock plus offset, learned from the Date header of each tail
// answer.
type tailGap struct {
	latest int64          // the latest time shown, at most the time it was shown (at first: when the tail started)
	lostAt int64          // when the tail was lost; the search starts before it
	offset int64          // the server's clock minus this machine's, in ns (learnClock)
	recent map[uint64]int // entries shown with times from latest-tailWindow on
	order  []shownEntry   // the same, in the order shown, to forget them
	filled map[uint64]int // entries the last gap's search showed, not yet seen again
	fills  []uint64       // the same in the order shown (with ones seen again), to forget the oldest
	// skipped counts, per entry shown before the gap's search, the
	// occurrences the search skipped; an entry equal to none shown
	// before needs no count, so it holds at most recent's keys however
	// large the gap.
	skipped map[uint64]int
	tries   int // reconnection attempts since the tail last delivered
	keep    int // bound of recent and of filled (maxRecent; tests set less)
	seed    maphash.Seed
}

type shownEntry struct {
	time int64
	key  uint64
}

const (
	// tailWindow is how far before the latest time shown a gap's
	// search starts.
	tailWindow = int64(time.Minute)
	// maxRecent bounds the entries remembered (~50 MB of a very busy
	// tail); the oldest go first. It bounds the entries a gap's search
	// remembers as well (filled), however long the gap.
	maxRecent = 1 << 20
)

func newTailGap(now int64) *tailGap {
	return &tailGap{latest: now, lostAt: now, recent: map[uint64]int{}, keep: maxRecent, seed: maphash.MakeSeed()}
}

func (g *tailGap) key(m *search.Match) uint64 {
	var h maphash.Hash
	h.SetSeed(g.seed)
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:], uint64(m.Time))
	binary.LittleEndian.PutUint32(b[8:], m.Stream)
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], uint64(len(m.Line)))
	h.Write(b[:8])
	h.Write(m.Line)
	h.Write(m.Attrs)
	return h.Sum64()
}

// learnClock takes the server's clock from the Date header of resp,
// received at local. The header is in whole seconds, cut down, and
// was written before local: the offset learned errs to the past, so a
// gap's search starts at most a little earlier than needed. An answer
// without a Date (a proxy that drops it) keeps the offset known.
func (g *tailGap) learnClock(resp *http.Response, local int64) {
	d, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return
	}
	g.offset = d.UnixNano() - local
}

// now is the server's time by this machine's clock and the offset.
func (g *tailGap) now() int64 { return time.Now().UnixNano() + g.offset }

// from is where a gap's search starts.
func (g *tailGap) from() int64 {
	if g.latest < math.MinInt64+tailWindow {
		return math.MinInt64
	}
	return g.latest - tailWindow
}

// shown records an entry stamped t printed at now, and forgets those that
// fell out of the window.
func (g *tailGap) shown(k uint64, t, now int64) {
	g.latest = max(g.latest, min(t, now))
	g.recent[k]++
	g.order = append(g.order, shownEntry{t, k})
	cut := 0
	for cut < len(g.order) && (g.order[cut].time < g.from() || len(g.order)-cut > g.keep) {
		o := g.order[cut]
		if g.recent[o.key]--; g.recent[o.key] <= 0 {
			delete(g.recent, o.key)
		}
		cut++
	}
	if cut > 0 {
		g.order = g.order[cut:]
		if cap(g.order) > 1024 && len(g.order) < cap(g.order)/4 {
			g.order = slices.Clone(g.order)
		}
	}
}

// startFill forgets the entries the previous gap's search showed.
func (g *tailGap) startFill() {
	g.filled, g.fills, g.skipped = map[uint64]int{}, nil, map[uint64]int{}
}

// fill records an entry a gap's search printed, which the new tail may
// deliver again. Past g.keep the oldest are forgotten: the search goes
// by time, and the new tail repeats only entries stored after it
// connected, which are the latest unless stamped long before.
func (g *tailGap) fill(k uint64) {
	g.filled[k]++
	g.fills = append(g.fills, k)
	if len(g.fills) <= g.keep {
		return
	}
	if o := g.fills[0]; g.filled[o] > 0 {
		// (0 when the tail repeated it already.)
		if g.filled[o]--; g.filled[o] == 0 {
			delete(g.filled, o)
		}
	}
	g.fills = g.fills[1:]
	if cap(g.fills) > 2*g.keep {
		g.fills = slices.Clone(g.fills)
	}
}

// repeated reports (once per entry) whether the tail's entry m was shown
// by the last gap's search.
func (g *tailGap) repeated(k uint64) bool {
	if g.filled[k] == 0 {
		return false
	}
	if g.filled[k]--; g.filled[k] == 0 {
		delete(g.filled, k)
	}
	return true
}

// backoff is how long to wait before the next reconnection attempt:
// from a quarter second, doubling, at most 5 s, each ±25% at random so
// that the clients of a restarted server do not all come back at once;
// longer if the server's answer err asked so (Retry-After, at most 30 s).
func (g *tailGap) backoff(err error) time.Duration {
	g.tries++
	d := min(250*time.Millisecond<<min(g.tries-1, 5), 5*time.Second)
	d = d*3/4 + rand.N(d/2)
	if se, ok := errors.AsType[*statusError](err); ok {
		d = max(d, min(se.retryAfter, 30*time.Second))
	}
	return d
}

// sleepCtx waits d, or returns ctx's error when it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
