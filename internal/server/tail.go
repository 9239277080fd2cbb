package server

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"haystack/internal/query"
	"haystack/internal/store"
)

// hub fans committed entries out to live tails. publish runs on the
// store's committer, so it never blocks: a subscriber that falls behind
// loses batches and is told how many entries it dropped.
type hub struct {
	mu     sync.Mutex
	subs   map[*sub]struct{}
	closed bool
}

type sub struct {
	ch      chan []store.LabeledEntry
	mu      sync.Mutex
	dropped int
}

func newHub() *hub { return &hub{subs: map[*sub]struct{}{}} }

func (h *hub) publish(es []store.LabeledEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	// The entries alias the pushers' buffers: copy once for all tails.
	cp := make([]store.LabeledEntry, len(es))
	for i, e := range es {
		cp[i] = store.LabeledEntry{Labels: e.Labels, Time: e.Time, Line: slices.Clone(e.Line)}
		if len(e.Attrs) > 0 {
			cp[i].Attrs = slices.Clone(e.Attrs)
		}
	}
	for s := range h.subs {
		select {
		case s.ch <- cp:
		default:
			s.mu.Lock()
			s.dropped += len(cp)
			s.mu.Unlock()
		}
	}
}

func (h *hub) subscribe() *sub {
	s := &sub{ch: make(chan []store.LabeledEntry, 256)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(s.ch)
		return s
	}
	h.subs[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.ch)
	}
}

func (s *sub) takeDropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.dropped
	s.dropped = 0
	return n
}

// tailFilter tests a live entry against a selection.
type tailFilter struct {
	sel   *selection
	cache map[string][]query.Label
}

// match reports whether e matches and gives the entry as a hit: its
// labels as a query's (metadata and a pipeline's labels merged in), Meta
// and Parsed apart (see hit).
func (f *tailFilter) match(e *store.LabeledEntry) (hit, bool) {
	h := hit{Time: e.Time, Labels: e.Labels, Line: e.Line, Attrs: e.Attrs}
	if f.sel.plan == nil {
		if len(f.sel.pat) == 0 {
			return h, true
		}
		if f.sel.fold {
			return h, containsFold(e.Line, f.sel.pat)
		}
		return h, strings.Contains(string(e.Line), string(f.sel.pat))
	}
	labs, ok := f.cache[e.Labels]
	if !ok {
		labs = queryLabels(e.Labels)
		f.cache[e.Labels] = labs
	}
	if !f.sel.plan.MatchStream(labs) {
		return h, false
	}
	return h, f.sel.labelHit(&h, labs, e.Labels, e.Attrs, e.Line)
}

// tailSetup resolves the tenant and subscribes; the caller unsubscribes
// and calls s.tails.Done.
func (s *Server) tailSetup(w http.ResponseWriter, r *http.Request, q string, fold, text bool) (*tenantStore, *sub, *tailFilter, bool) {
	tenant, ok := s.tenant(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	sel, err := parseSelectionText(q, fold, text)
	if err != nil {
		s.queryErr(w, err)
		return nil, nil, nil, false
	}
	// A tail on a tenant without data creates its (empty) store, so the
	// first push reaches the tail.
	ts, err := s.openTenant(tenant, true)
	if err != nil {
		s.queryErr(w, err)
		return nil, nil, nil, false
	}
	// Counted for Close, which waits for running tails; under s.mu so
	// that no tail starts once Close waits.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.queryErr(w, errShuttingDown)
		return nil, nil, nil, false
	}
	if s.cfg.MaxTails > 0 && s.tailCount >= s.cfg.MaxTails {
		s.mu.Unlock()
		s.met.rejected.WithLabelValues("too_many_tails").Inc()
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many live tails (limit %d, hay serve --max-tails); close one, or retry later", s.cfg.MaxTails))
		return nil, nil, nil, false
	}
	s.tailCount++
	s.tails.Add(1)
	s.mu.Unlock()
	return ts, ts.hub.subscribe(), &tailFilter{sel: sel, cache: map[string][]query.Label{}}, true
}

// DefaultMaxTails is Config.MaxTails' default: a team's browsers and
// Grafana panels, each tail filtering every entry of its tenant.
const DefaultMaxTails = 256

// tailDone ends a tail counted by tailSetup.
func (s *Server) tailDone() {
	s.mu.Lock()
	s.tailCount--
	s.mu.Unlock()
	s.tails.Done()
}

// Loki's tail parameters: delay_for is at most 5 seconds, and without
// start the tail replays the last hour (up to limit entries, default 100).
const (
	maxTailDelay     = 5 * time.Second
	tailDefaultSince = time.Hour
	tailDefaultLimit = 100
	// tailMaxPending bounds what a delayed tail holds back: past it, the
	// oldest entries go out before their delay is over.
	tailMaxPending = 100_000
	// tailDedupWindow is how long live entries are checked against the
	// replay: an entry committed while the replay read the store reaches
	// both.
	tailDedupWindow = 2 * time.Second
	// tailCoalesce is how long a delayed tail waits past an entry's due
	// time, so that entries due together go out in one message.
	tailCoalesce = 50 * time.Millisecond
)

// tailParams are /loki/api/v1/tail's parameters, read before the
// WebSocket upgrade so that a bad one is a 400 the client can read.
type tailParams struct {
	start int64         // replay stored entries from this time on
	limit int           // at most this many replayed entries (the newest)
	delay time.Duration // hold live entries back this long to sort late ones in
}

func parseTailParams(p url.Values, maxLimit int, now time.Time) (tailParams, error) {
	var tp tailParams
	var err error
	if tp.start, err = parseTime("start", p.Get("start"), now.Add(-tailDefaultSince).UnixNano()); err != nil {
		return tp, err
	}
	if tp.limit, err = parseLimit(p.Get("limit"), tailDefaultLimit, maxLimit); err != nil {
		return tp, err
	}
	if v := p.Get("delay_for"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return tp, badRequest("bad_param", "delay_for=%q: want a whole number of seconds", v)
		}
		if time.Duration(n)*time.Second > maxTailDelay {
			return tp, badRequest("bad_param", "delay_for can't be greater than %d", int(maxTailDelay/time.Second))
		}
		tp.delay = time.Duration(n) * time.Second
	}
	return tp, nil
}

// tailEntry is a live or replayed entry that matched, with the labels it
// is reported under (the stream's, plus a pipeline's extracted ones).
type tailEntry struct {
	labels       string
	meta, parsed string // as hit's Meta and Parsed
	time         int64
	line         []byte
}

func newTailEntry(h *hit) tailEntry {
	return tailEntry{labels: h.Labels, meta: h.Meta, parsed: h.Parsed, time: h.Time, line: h.Line}
}

// key identifies e for the replay's dedup: a hash of its labels, time
// and line (a string of them copied every replayed line once more).
func (e tailEntry) key(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(e.labels)
	h.WriteByte(0)
	var t [8]byte
	binary.LittleEndian.PutUint64(t[:], uint64(e.time))
	h.Write(t[:])
	h.Write(e.line)
	return h.Sum64()
}

// size is what e counts toward a tail message and a delayed tail's bound.
func (e *tailEntry) size() int64 {
	return int64(len(e.labels)+len(e.meta)+len(e.parsed)+len(e.line)) + 32
}

// tailMessageBytes is about the most entry bytes one Loki tail message
// carries (one entry may be larger): a message is built whole (its
// strings, then its JSON), so a batch or a replay is sent in pieces.
const tailMessageBytes = 1 << 20

// tailDelay holds live entries back for delay_for, as Loki does "to let
// slow loggers catch up": an entry goes out once delay has passed since
// its own time (or since it arrived, when its time is in the future), and
// each message carries what is due, sorted by time. An entry that arrives
// after later ones went out is still sent, out of order.
type tailDelay struct {
	delay   time.Duration
	pending []tailPending // sorted by due, then arrival
	seq     uint64
	// maxBytes (0: none) bounds the entries held back (their sizes,
	// bytes): past it, as past tailMaxPending, the oldest go out early.
	// line_format can make each entry of a busy tenant 1 MiB.
	maxBytes, bytes int64
}

type tailPending struct {
	due time.Time
	seq uint64
	e   tailEntry
}

func (d *tailDelay) add(es []tailEntry, now time.Time) {
	add := make([]tailPending, 0, len(es))
	for _, e := range es {
		due := time.Unix(0, e.time)
		if due.After(now) {
			due = now
		}
		d.seq++
		add = append(add, tailPending{due: due.Add(d.delay), seq: d.seq, e: e})
		d.bytes += e.size()
	}
	byDue := func(a, b tailPending) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	}
	slices.SortFunc(add, byDue)
	// Merge: what is held is sorted already, and a busy tail holds many.
	merged := make([]tailPending, 0, len(d.pending)+len(add))
	i, j := 0, 0
	for i < len(d.pending) && j < len(add) {
		if byDue(d.pending[i], add[j]) <= 0 {
			merged = append(merged, d.pending[i])
			i++
		} else {
			merged = append(merged, add[j])
			j++
		}
	}
	merged = append(merged, d.pending[i:]...)
	d.pending = append(merged, add[j:]...)
}

// take removes and returns the entries due at now (and the oldest ones
// past tailMaxPending), sorted by time.
func (d *tailDelay) take(now time.Time) []tailEntry {
	n := 0
	for n < len(d.pending) && (!d.pending[n].due.After(now) || len(d.pending)-n > tailMaxPending || d.maxBytes > 0 && d.bytes > d.maxBytes) {
		d.bytes -= d.pending[n].e.size()
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]tailEntry, n)
	for i := range out {
		out[i] = d.pending[i].e
	}
	d.pending = slices.Delete(d.pending, 0, n)
	slices.SortStableFunc(out, func(a, b tailEntry) int { return cmp.Compare(a.time, b.time) })
	return out
}

// next is when the first held entry is due; ok is false when none is held.
func (d *tailDelay) next() (time.Time, bool) {
	if len(d.pending) == 0 {
		return time.Time{}, false
	}
	return d.pending[0].due, true
}

// tailPingInterval is how often a tail pings its client, as Loki does
// (every second): a tail whose query matches nothing for a while must
// not look idle to the proxies between Grafana and hay (nginx's default
// proxy_read_timeout is 60 s), which would cut it, and Grafana then
// reconnects, replaying the last entries again.
var tailPingInterval = time.Second // a variable for tests

// tailPing pings c until ctx ends. The pongs are read by CloseRead's
// reader; a client that stops answering is left to the read side and
// the write timeouts.
func tailPing(ctx context.Context, c *websocket.Conn, end func()) {
	t := time.NewTicker(tailPingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, tailPongTimeout)
		err := c.Ping(pctx)
		cancel()
		if err != nil {
			// A client that answers no ping is gone: end the tail. It
			// used to live on, with its goroutines and descriptor,
			// while its query matched nothing to write (soak S2).
			end()
			c.CloseNow() // no close handshake: it would wait for the silent client
			return
		}
	}
}

// tailPongTimeout is how long a tail waits for a ping's pong, and
// tailWriteTimeout for a client to take what a tail sends (variables
// for tests).
var (
	tailPongTimeout  = 30 * time.Second
	tailWriteTimeout = 30 * time.Second
)

// lokiTail serves /loki/api/v1/tail over WebSocket: each message is
// {"streams":[{"stream":{...},"values":[["<ns>","<line>"]]}],"dropped_entries":[...]}.
// It first replays the newest stored entries (at most limit) from start
// on (default: an hour ago), oldest first, then sends entries as they are
// committed, delayed by delay_for seconds when asked.
func (s *Server) lokiTail(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query()
	tp, err := parseTailParams(p, s.cfg.MaxQueryLimit, s.cfg.Now())
	if err != nil {
		s.queryErr(w, err)
		return
	}
	ts, sb, f, ok := s.tailSetup(w, r, p.Get("query"), false, false)
	if !ok {
		return
	}
	defer s.tailDone()
	defer ts.hub.unsubscribe(sb)
	f.sel.categorize = categorized(r)
	// The replay reads the store as a query does: it takes a query slot
	// (before the upgrade, so that none free is a 429 the client reads)
	// and runs under the query timeout. It went around both (auth audit
	// A12).
	if !s.takeSlot(w, r) {
		return
	}
	slot := true
	release := func() {
		if slot {
			<-s.sem
			slot = false
		}
	}
	defer release()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, stop := context.WithCancel(c.CloseRead(r.Context()))
	defer stop()
	go tailPing(ctx, c, stop)

	var sendMessage func(es []tailEntry, dropped int) error

	// send sends es in messages of about tailMessageBytes, the dropped
	// count with the first.
	send := func(es []tailEntry, dropped int) error {
		for {
			n, size := 0, int64(0)
			for n < len(es) && (n == 0 || size+es[n].size() <= tailMessageBytes) {
				size += es[n].size()
				n++
			}
			if err := sendMessage(es[:n], dropped); err != nil {
				return err
			}
			es, dropped = es[n:], 0
			if len(es) == 0 {
				return nil
			}
		}
	}
	sendMessage = func(es []tailEntry, dropped int) error {
		if len(es) == 0 && dropped == 0 {
			return nil
		}
		hits := make([]hit, len(es))
		for i, e := range es {
			hits[i] = hit{Time: e.time, Labels: e.labels, Meta: e.meta, Parsed: e.parsed, Line: e.line}
		}
		// As Loki's tail: encodingFlags after the streams when asked.
		msg := struct {
			Streams       []*lokiStream `json:"streams"`
			Dropped       []any         `json:"dropped_entries"`
			EncodingFlags []string      `json:"encodingFlags,omitempty"`
		}{Streams: groupStreams(hits, f.sel.categorize), EncodingFlags: encodingFlags(r)}
		if dropped > 0 {
			msg.Dropped = []any{map[string]any{"labels": map[string]string{}, "timestamp": fmt.Sprint(time.Now().UnixNano()), "count": dropped}}
		}
		b, _ := json.Marshal(msg)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, b)
	}

	// The replay: the newest entries from start on, sent oldest first.
	// The subscription came first, so nothing committed meanwhile is
	// missed; what reaches both is dropped from the live side below.
	f.sel.start = tp.start
	rctx, rcancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
	// Bounded by --max-query-bytes as a query's answer: the newest
	// entries that fit.
	hits, ans, err := collect(rctx, ts, f.sel, s.answerLimit(tp.limit, true))
	rcancel()
	if ans.bytesCut {
		s.met.answersCut.WithLabelValues("tail").Inc()
	}
	release()
	if err != nil {
		if ctx.Err() == nil {
			reason := "replay failed: " + err.Error()
			if errors.Is(err, context.DeadlineExceeded) {
				reason = fmt.Sprintf("replay timed out after %s (--query-timeout): narrow the query or its start", s.cfg.QueryTimeout)
			}
			c.Close(websocket.StatusInternalError, closeReason(reason))
		}
		return
	}
	seed := maphash.MakeSeed()
	replayed := map[uint64]int{}
	es := make([]tailEntry, 0, len(hits))
	// hits are newest first, the entries of one time in push order (as
	// query_range answers either way): replay oldest first, keeping push
	// order among equal times, as Loki does (review 15c F2: a stack
	// trace stamped with one time replayed upside down).
	slices.Reverse(hits)
	for i := 0; i < len(hits); {
		j := i + 1
		for j < len(hits) && hits[j].Time == hits[i].Time {
			j++
		}
		slices.Reverse(hits[i:j])
		i = j
	}
	for i := range hits {
		e := newTailEntry(&hits[i])
		es = append(es, e)
		replayed[e.key(seed)]++
	}
	hits = nil
	if err := send(es, 0); err != nil {
		return
	}
	es = nil
	dedupUntil := time.Now().Add(tailDedupWindow)

	// live calls fn with the entries of batch that match, about
	// tailMessageBytes at a time: a push's batch can hold a million
	// entries, each of which line_format may make 1 MiB.
	live := func(batch []store.LabeledEntry, fn func([]tailEntry) error) error {
		var out []tailEntry
		var size int64
		for i := range batch {
			h, ok := f.match(&batch[i])
			if !ok {
				continue
			}
			e := newTailEntry(&h)
			if len(replayed) > 0 {
				if time.Now().After(dedupUntil) {
					clear(replayed)
				} else if k := e.key(seed); replayed[k] > 0 {
					replayed[k]--
					continue
				}
			}
			out = append(out, e)
			if size += e.size(); size >= tailMessageBytes {
				if err := fn(out); err != nil {
					return err
				}
				out, size = nil, 0
			}
		}
		if len(out) == 0 {
			return nil
		}
		return fn(out)
	}
	delayed := &tailDelay{delay: tp.delay, maxBytes: max(s.cfg.MaxQueryBytes, 0)}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case batch, ok := <-sb.ch:
			if !ok {
				send(delayed.take(time.Now().Add(maxTailDelay+time.Hour)), sb.takeDropped())
				c.Close(websocket.StatusGoingAway, "server shutting down")
				return
			}
			if tp.delay == 0 {
				dropped := sb.takeDropped()
				err := live(batch, func(es []tailEntry) error {
					err := send(es, dropped)
					dropped = 0
					return err
				})
				if err == nil {
					err = send(nil, dropped)
				}
				if err != nil {
					return
				}
				continue
			}
			err := live(batch, func(es []tailEntry) error {
				// What is over the bound goes out now.
				delayed.add(es, time.Now())
				return send(delayed.take(time.Now()), 0)
			})
			if err != nil {
				return
			}
			if dropped := sb.takeDropped(); dropped > 0 {
				if err := send(nil, dropped); err != nil {
					return
				}
			}
		case <-timer.C:
		}
		if tp.delay > 0 {
			now := time.Now()
			if err := send(delayed.take(now), 0); err != nil {
				return
			}
			if due, ok := delayed.next(); ok {
				timer.Reset(max(due.Sub(now), 0) + tailCoalesce)
			}
		}
	}
}

// closeReason fits a WebSocket close reason in the 123 bytes the
// protocol allows, cutting at a rune boundary.
func closeReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// nativeTail serves /api/v1/tail as server-sent events (API.md).
func (s *Server) nativeTail(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query()
	// text=1 and labels=stream as for /api/v1/search (hay search
	// --server --follow sends them).
	text, streamLabels := p.Get("text") == "1", p.Get("labels") == "stream"
	// dropped=1: say how many entries this tail lost by falling behind,
	// as an event {"dropped":N} (the UI does not ask: it has no row for it).
	reportDrops := p.Get("dropped") == "1"
	if _, err := parseSelectionText(p.Get("q"), false, text); err != nil {
		// EventSource cannot read a 400's body and would retry forever:
		// send the error as an event, which the UI shows before closing.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	ts, sb, f, ok := s.tailSetup(w, r, p.Get("q"), p.Get("fold") == "1", text)
	if !ok {
		return
	}
	defer s.tailDone()
	defer ts.hub.unsubscribe(sb)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// Every write has a deadline: a client that stops reading (a frozen
	// tab, a dead network) blocked the handler in Flush for good, with
	// its goroutine, descriptor and queued batches (soak S1).
	deadline := func() { rc.SetWriteDeadline(time.Now().Add(tailWriteTimeout)) }
	deadline()
	fmt.Fprint(w, ": tail started\n\n")
	rc.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			deadline()
			fmt.Fprint(w, ": ping\n\n")
			if rc.Flush() != nil {
				return
			}
		case es, ok := <-sb.ch:
			if !ok {
				// reason: a client that reconnects (hay search -f) tells
				// a restart from a refusal without reading the message.
				fmt.Fprint(w, "data: {\"error\":\"server shutting down\",\"reason\":\"shutting_down\"}\n\n")
				rc.Flush()
				return
			}
			deadline()
			for i := range es {
				h, ok := f.match(&es[i])
				if !ok {
					continue
				}
				if streamLabels {
					h.Labels, h.Meta = es[i].Labels, ""
				}
				b, _ := json.Marshal(nativeHit(&h))
				if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
					return
				}
			}
			if n := sb.takeDropped(); n > 0 && reportDrops {
				if _, err := fmt.Fprintf(w, "data: {\"dropped\":%d}\n\n", n); err != nil {
					return
				}
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}
