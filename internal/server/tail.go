package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

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

func (f *tailFilter) match(e *store.LabeledEntry) (string, bool) {
	if f.sel.plan == nil {
		if len(f.sel.pat) == 0 {
			return e.Labels, true
		}
		if f.sel.fold {
			return e.Labels, containsFold(e.Line, f.sel.pat)
		}
		return e.Labels, strings.Contains(string(e.Line), string(f.sel.pat))
	}
	labs, ok := f.cache[e.Labels]
	if !ok {
		labs = queryLabels(e.Labels)
		f.cache[e.Labels] = labs
	}
	if !f.sel.plan.MatchStream(labs) {
		return "", false
	}
	ext, ok := f.sel.plan.Labels(labs, e.Line)
	if !ok {
		return "", false
	}
	if len(ext) > 0 {
		return mergeLabels(labs, ext), true
	}
	return e.Labels, true
}

// tailSetup resolves the tenant and subscribes; the caller unsubscribes.
func (s *Server) tailSetup(w http.ResponseWriter, r *http.Request, q string, fold bool) (*tenantStore, *sub, *tailFilter, bool) {
	tenant, ok := s.tenant(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	sel, err := parseSelection(q, fold)
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
	return ts, ts.hub.subscribe(), &tailFilter{sel: sel, cache: map[string][]query.Label{}}, true
}

// lokiTail serves /loki/api/v1/tail over WebSocket: each message is
// {"streams":[{"stream":{...},"values":[["<ns>","<line>"]]}],"dropped_entries":[...]}.
// start (default now) replays stored entries from then on first, up to limit.
func (s *Server) lokiTail(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query()
	ts, sb, f, ok := s.tailSetup(w, r, p.Get("query"), false)
	if !ok {
		return
	}
	defer ts.hub.unsubscribe(sb)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())

	send := func(es []store.LabeledEntry, dropped int) error {
		groups := map[string]*lokiStream{}
		var order []string
		for i := range es {
			labels, ok := f.match(&es[i])
			if !ok {
				continue
			}
			g := groups[labels]
			if g == nil {
				g = &lokiStream{Stream: labelMap(labels)}
				groups[labels] = g
				order = append(order, labels)
			}
			g.Values = append(g.Values, [2]string{fmt.Sprint(es[i].Time), string(es[i].Line)})
		}
		if len(order) == 0 && dropped == 0 {
			return nil
		}
		msg := struct {
			Streams []*lokiStream `json:"streams"`
			Dropped []any         `json:"dropped_entries"`
		}{Streams: []*lokiStream{}}
		for _, k := range order {
			msg.Streams = append(msg.Streams, groups[k])
		}
		if dropped > 0 {
			msg.Dropped = []any{map[string]any{"labels": map[string]string{}, "timestamp": fmt.Sprint(time.Now().UnixNano()), "count": dropped}}
		}
		b, _ := json.Marshal(msg)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return c.Write(wctx, websocket.MessageText, b)
	}

	if st := p.Get("start"); st != "" {
		start, err := parseTime("start", st, 0)
		if err == nil {
			limit, _ := parseLimit(p.Get("limit"), 100, s.cfg.MaxQueryLimit)
			f.sel.start = start
			hits, _, err := collect(ctx, ts, f.sel, limit, true)
			if err == nil {
				var es []store.LabeledEntry
				for i := len(hits) - 1; i >= 0; i-- {
					es = append(es, store.LabeledEntry{Labels: hits[i].Labels, Time: hits[i].Time, Line: hits[i].Line})
				}
				if len(es) > 0 {
					// Already filtered: send them as they are.
					saved := f.sel
					f.sel = &selection{}
					err = send(es, 0)
					f.sel = saved
					if err != nil {
						return
					}
				}
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case es, ok := <-sb.ch:
			if !ok {
				c.Close(websocket.StatusGoingAway, "server shutting down")
				return
			}
			if err := send(es, sb.takeDropped()); err != nil {
				return
			}
		}
	}
}

// nativeTail serves /api/v1/tail as server-sent events (API.md).
func (s *Server) nativeTail(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query()
	if _, err := parseSelection(p.Get("q"), false); err != nil {
		// EventSource cannot read a 400's body and would retry forever:
		// send the error as an event, which the UI shows before closing.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		fmt.Fprintf(w, "data: %s\n\n", b)
		return
	}
	ts, sb, f, ok := s.tailSetup(w, r, p.Get("q"), p.Get("fold") == "1")
	if !ok {
		return
	}
	defer ts.hub.unsubscribe(sb)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	fmt.Fprint(w, ": tail started\n\n")
	rc.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			if rc.Flush() != nil {
				return
			}
		case es, ok := <-sb.ch:
			if !ok {
				fmt.Fprint(w, "data: {\"error\":\"server shutting down\"}\n\n")
				rc.Flush()
				return
			}
			for i := range es {
				labels, ok := f.match(&es[i])
				if !ok {
					continue
				}
				b, _ := json.Marshal(nativeEntry(es[i].Time, labels, es[i].Line))
				fmt.Fprintf(w, "data: %s\n\n", b)
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}
