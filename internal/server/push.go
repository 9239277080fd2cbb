package server

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"

	"haystack/internal/ingest"
	"haystack/internal/store"
)

// pushStream is one decoded stream of a push, before validation: labels
// either as Loki's text form (protobuf, jsonl) or as a map (JSON).
type pushStream struct {
	labels  string
	lmap    map[string]string
	entries []pushEntry
	// metaErrs holds, by index in entries, the entries refused for their
	// structured metadata (push_attrs.go); validate refuses them.
	metaErrs map[int]*metaRefusal
	// collisions counts the metadata names of its entries given twice
	// with different values (metaEncoder.encode).
	collisions int
	// lineLens holds, by index in entries, the length of a line of
	// which the decoder kept only the first --max-line + 1 bytes (an
	// OTLP body rendered from an array or a map): for the refusal's
	// message; the cut under --line-policy=truncate is the same.
	lineLens map[int]int
}

// pushEntry is a store entry whose Labels validate fills in. The
// decoders put every stream's entries in one array, each stream's after
// the previous one's, so that validate keeps the valid entries in place
// (inPlace) instead of copying them all: a push held each entry twice
// (32 + 48 bytes) besides the store's copies (E4).
type pushEntry = store.LabeledEntry

// httpError is an error with the status it is answered with.
type httpError struct {
	status int
	reason string // metric label for rejections
	msg    string
}

// retryAfter is the Retry-After header of the answer, if any: a push
// refused for the in-flight budget may be retried in a second.
func (e *httpError) retryAfter() string {
	if e.reason == "push_budget" {
		return "1"
	}
	return ""
}

func (e *httpError) Error() string { return e.msg }

func badRequest(reason, format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// readBody reads a request body within the configured caps: MaxBody bytes
// as sent, and MaxDecompressed bytes after gzip (Content-Encoding) or
// snappy (protobuf) decompression, so a small compression bomb cannot make
// the server allocate without bound.
func (s *Server) readBody(r *http.Request, snappyBlock bool) ([]byte, error) {
	body := http.MaxBytesReader(nil, r.Body, s.cfg.MaxBody)
	raw, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &httpError{http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body exceeds the limit of %d bytes; nothing was stored", s.cfg.MaxBody)}
		}
		return nil, badRequest("read_error", "reading request body: %v; nothing was stored", err)
	}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, badRequest("bad_gzip", "gzip body: %v; nothing was stored", err)
		}
		if raw, err = s.readDecompressed(zr, "gzip"); err != nil {
			return nil, err
		}
	case "deflate":
		// HTTP's deflate is a zlib stream (RFC 9110), but some clients
		// send bare deflate data, which Loki accepts too.
		var zr io.Reader
		if z, err := zlib.NewReader(bytes.NewReader(raw)); err == nil {
			zr = z
		} else {
			zr = flate.NewReader(bytes.NewReader(raw))
		}
		if raw, err = s.readDecompressed(zr, "deflate"); err != nil {
			return nil, err
		}
	case "snappy":
		// Grafana Alloy's loki.write and Vector's loki sink label their
		// snappy-compressed protobuf pushes so; the body is then the
		// snappy block the protobuf format has anyway. A JSON body with
		// this header is a snappy block too.
		if !snappyBlock {
			return s.decodeSnappy(raw)
		}
	default:
		return nil, &httpError{http.StatusUnsupportedMediaType, "bad_encoding", fmt.Sprintf("unsupported Content-Encoding %q (gzip, deflate, snappy or none); nothing was stored", enc)}
	}
	if snappyBlock {
		return s.decodeSnappy(raw)
	}
	return raw, nil
}

// readDecompressed reads a decompressing reader to its end, within
// MaxDecompressed bytes.
func (s *Server) readDecompressed(zr io.Reader, name string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(zr, s.cfg.MaxDecompressed+1))
	if err != nil {
		return nil, badRequest("bad_"+name, "%s body: %v; nothing was stored", name, err)
	}
	if int64(len(out)) > s.cfg.MaxDecompressed {
		return nil, &httpError{http.StatusRequestEntityTooLarge, "decompressed_too_large", fmt.Sprintf("decompressed body exceeds the limit of %d bytes; nothing was stored", s.cfg.MaxDecompressed)}
	}
	return out, nil
}

// decodeSnappy decodes a snappy block (not the framed stream format)
// within MaxDecompressed bytes; the size is read from the block's header
// before anything is allocated.
func (s *Server) decodeSnappy(raw []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(raw)
	if err != nil {
		return nil, badRequest("bad_snappy", "snappy body: %v; nothing was stored", err)
	}
	if int64(n) > s.cfg.MaxDecompressed {
		return nil, &httpError{http.StatusRequestEntityTooLarge, "decompressed_too_large", fmt.Sprintf("decompressed body (%d bytes) exceeds the limit of %d bytes; nothing was stored", n, s.cfg.MaxDecompressed)}
	}
	out, err := snappy.Decode(nil, raw)
	if err != nil {
		return nil, badRequest("bad_snappy", "snappy body: %v; nothing was stored", err)
	}
	return out, nil
}

// decodeJSONBody decodes a body that is one JSON value into v, refusing
// anything after it.
func decodeJSONBody(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("invalid JSON: data after the top-level object")
	}
	return nil
}

// decodePushJSON decodes Loki's JSON push body:
//
//	{"streams":[{"stream":{"app":"x"},"values":[["<unix ns>","<line>"], ["<unix ns>","<line>",{"trace_id":"ab12"}]]}]}
//
// The optional third element is the entry's structured metadata: an
// object of string values, as Loki requires (null is none; anything else
// is a malformed push).
func decodePushJSON(b []byte) ([]pushStream, error) {
	var req struct {
		Streams []struct {
			Stream map[string]string   `json:"stream"`
			Values [][]json.RawMessage `json:"values"`
		} `json:"streams"`
	}
	if err := decodeJSONBody(b, &req); err != nil {
		return nil, err
	}
	out := make([]pushStream, 0, len(req.Streams))
	n := 0
	for _, st := range req.Streams {
		n += len(st.Values)
	}
	all := make([]pushEntry, 0, n)
	var me metaEncoder
	for i, st := range req.Streams {
		ps := pushStream{lmap: st.Stream}
		if st.Stream == nil {
			return nil, fmt.Errorf("stream %d: missing \"stream\" labels", i)
		}
		for j, v := range st.Values {
			if len(v) < 2 || len(v) > 3 {
				return nil, fmt.Errorf("stream %d, entry %d: a value is [\"<unix ns>\", \"<line>\"] with optional metadata, got %d elements", i, j, len(v))
			}
			var tss, line string
			if err := json.Unmarshal(v[0], &tss); err != nil {
				return nil, fmt.Errorf("stream %d, entry %d: timestamp must be a string of Unix nanoseconds", i, j)
			}
			ts, err := strconv.ParseInt(tss, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("stream %d, entry %d: timestamp %q: not Unix nanoseconds", i, j, tss)
			}
			if err := json.Unmarshal(v[1], &line); err != nil {
				return nil, fmt.Errorf("stream %d, entry %d: line must be a string", i, j)
			}
			e := pushEntry{Time: ts, Line: []byte(line)}
			if len(v) == 3 && string(bytes.TrimSpace(v[2])) != "null" {
				// (null is no metadata, as Loki's decoder reads it.)
				var r *metaRefusal
				if e.Attrs, r, err = me.fromJSON(v[2]); err != nil {
					return nil, fmt.Errorf("stream %d, entry %d: %w", i, j, err)
				}
				if r != nil {
					ps.setMetaRefusal(j, r)
				}
			}
			all = append(all, e)
		}
		ps.entries = all[len(all)-len(st.Values):]
		ps.collisions = me.takeCollisions()
		out = append(out, ps)
	}
	return out, nil
}

// decodePushJSONL decodes Haystack's JSON-lines push body. Each non-blank
// line is one object:
//
//	{"labels":{"app":"x"},"ts":"1764467400123456789","line":"text"}
//
// labels is an object or Loki's text form ("{app=\"x\"}"); "stream" is
// accepted as its synonym. structuredMetadata is optional: the entry's
// structured metadata, an object of string values as the third element
// of a Loki push JSON value. Without it, "metadata" is its synonym when it
// is an object of strings (anything else there is no metadata). Both keys
// match exactly, letter case included. ts (or "time") is optional: a string or number
// of Unix nanoseconds, or an RFC 3339 string; absent means the time of
// arrival (now). line is required. Lines whose labels are written the
// same form one stream, in the order of their first line; their labels
// are decoded once. (Each line was its own stream with its own labels
// map unless the previous line's labels were the same: lines alternating
// between label sets cost ~1.2 KB of memory each, E4.)
func decodePushJSONL(b []byte, now int64) ([]pushStream, error) {
	var out []pushStream
	byLabels := map[string]int{} // labels as written -> index in out
	n := 0
	var me metaEncoder
	for len(b) > 0 {
		var ln []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			ln, b = b[:i], b[i+1:]
		} else {
			ln, b = b, nil
		}
		n++
		ln = bytes.TrimSpace(ln)
		if len(ln) == 0 {
			continue
		}
		var obj struct {
			Labels json.RawMessage `json:"labels"`
			Stream json.RawMessage `json:"stream"`
			TS     json.RawMessage `json:"ts"`
			Time   json.RawMessage `json:"time"`
			Line   *string         `json:"line"`
		}
		if err := json.Unmarshal(ln, &obj); err != nil {
			return nil, fmt.Errorf("line %d: invalid JSON: %w", n, err)
		}
		if obj.Line == nil {
			return nil, fmt.Errorf("line %d: missing \"line\"", n)
		}
		lab := obj.Labels
		if lab == nil {
			lab = obj.Stream
		}
		ts := now
		raw := obj.TS
		if raw == nil {
			raw = obj.Time
		}
		if len(raw) > 0 && string(raw) != "null" {
			t, err := parseJSONLTime(raw)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			ts = t
		}
		e := pushEntry{Time: ts, Line: []byte(*obj.Line)}
		var refusal *metaRefusal
		meta, err := jsonlMeta(ln)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if meta != nil {
			if e.Attrs, refusal, err = me.fromJSON(meta); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if refusal != nil {
				refusal.msg = fmt.Sprintf("line %d: %s", n, refusal.msg)
			}
		}
		if k, ok := byLabels[string(lab)]; ok {
			if refusal != nil {
				out[k].setMetaRefusal(len(out[k].entries), refusal)
			}
			out[k].collisions += me.takeCollisions()
			out[k].entries = append(out[k].entries, e)
			continue
		}
		var ps pushStream
		switch {
		case len(lab) == 0 || string(lab) == "null":
			return nil, fmt.Errorf("line %d: missing \"labels\"", n)
		case lab[0] == '"':
			if err := json.Unmarshal(lab, &ps.labels); err != nil {
				return nil, fmt.Errorf("line %d: labels: %w", n, err)
			}
			if ps.labels == "" {
				return nil, fmt.Errorf("line %d: empty \"labels\"", n)
			}
		default:
			if err := json.Unmarshal(lab, &ps.lmap); err != nil {
				return nil, fmt.Errorf("line %d: labels must be an object of strings or a label string", n)
			}
		}
		ps.entries = []pushEntry{e}
		ps.collisions = me.takeCollisions()
		if refusal != nil {
			ps.setMetaRefusal(0, refusal)
		}
		byLabels[string(lab)] = len(out)
		out = append(out, ps)
	}
	return out, nil
}

// jsonlMeta finds the structured metadata of a jsonl line (a valid JSON
// object): its "structuredMetadata", else its "metadata" when that is an
// object of strings; nil for none. Keys match exactly (encoding/json's
// struct fields match any letter case), and a "metadata" of another kind
// is a field of the shipper's, not metadata: it refuses nothing.
func jsonlMeta(ln []byte) (json.RawMessage, error) {
	// The object is decoded a second time only when it may have such a
	// key: "etadata", or an escape that could spell it.
	if !bytes.Contains(ln, []byte("etadata")) && !bytes.Contains(ln, []byte(`\u`)) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ln, &m); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if v := m["structuredMetadata"]; v != nil && string(v) != "null" {
		return v, nil
	}
	if v := m["metadata"]; v != nil && string(v) != "null" {
		if _, err := parseMetaJSON(v, nil); err == nil {
			return v, nil
		}
	}
	return nil, nil
}

func parseJSONLTime(raw json.RawMessage) (int64, error) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("ts: %w", err)
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v, nil
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("ts %q: neither Unix nanoseconds nor RFC 3339", s)
		}
		if n := ingest.UnixNano(t); n == math.MinInt64 || n == math.MaxInt64 {
			// time.UnixNano would wrap it to another century.
			return 0, fmt.Errorf("ts %q: outside the years 1678 to 2261 that Unix nanoseconds hold", s)
		}
		return t.UnixNano(), nil
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ts %s: not an integer of Unix nanoseconds", raw)
	}
	return v, nil
}

// truncMarker ends a line cut to --max-line under --line-policy=truncate.
const truncMarker = "…[truncated]"

// pushRejects collects what validate refused: how many entries, the
// reason of the first (the rejection metric's label) and the first few
// messages, for the answer.
type pushRejects struct {
	entries int
	reason  string
	msgs    []string
}

func (rj *pushRejects) add(n int, reason, format string, args ...any) {
	if rj.entries == 0 {
		rj.reason = reason
	}
	rj.entries += n
	if len(rj.msgs) < 3 {
		rj.msgs = append(rj.msgs, fmt.Sprintf(format, args...))
	}
}

// err is the 400 that answers a push with refused entries: as Loki, the
// valid entries of the push are stored and the invalid ones named.
func (rj *pushRejects) err(stored int) error {
	if rj.entries == 0 {
		return nil
	}
	msg := strings.Join(rj.msgs, "; ")
	if rj.entries > len(rj.msgs) {
		msg += "; …"
	}
	if stored == 0 {
		return badRequest(rj.reason, "%s; nothing was stored", msg)
	}
	return badRequest(rj.reason, "%s; %d entries refused, the other %d stored", msg, rj.entries, stored)
}

// validate checks every stream and entry of a push against the limits.
// An invalid stream (labels) or entry is left out and recorded in the
// returned pushRejects; the others are returned to be stored, as Loki
// does: shippers drop a batch answered 400, so refusing all of it for one
// bad entry would lose the good ones too.
func (s *Server) validate(streams []pushStream) ([]store.LabeledEntry, int, *pushRejects) {
	now := s.cfg.Now().UnixNano()
	out := inPlace(streams)
	if out == nil {
		n := 0
		for _, st := range streams {
			n += len(st.entries)
		}
		// Sized for every entry: grown by append, the array of a push
		// of millions of entries was allocated five times over (E4).
		out = make([]store.LabeledEntry, 0, n)
	}
	rj := new(pushRejects)
	var la levelAttrs
	cuts := 0 // lines cut under --line-policy=truncate, counted once stored
	collisions := 0
	for _, st := range streams {
		collisions += st.collisions
	}
	if collisions > 0 {
		s.met.metaCollisions.Add(float64(collisions))
	}
	for i, st := range streams {
		labs, err := s.streamLabels(st)
		if err != nil {
			rj.add(len(st.entries), "bad_labels", "stream %d: %v", i, err)
			continue
		}
		if len(labs) > s.cfg.MaxLabels {
			rj.add(len(st.entries), "too_many_labels", "stream %d %s: %d labels, more than the limit of %d", i, labs, len(labs), s.cfg.MaxLabels)
			continue
		}
		if msg := s.longLabel(labs); msg != "" {
			rj.add(len(st.entries), "label_too_long", "stream %d: %s", i, msg)
			continue
		}
		if !s.cfg.NoServiceNameDiscovery {
			// After the limits, as Loki adds it: a stream at
			// --max-labels is not refused for the label hay adds.
			labs = discoverServiceName(labs)
		}
		// The stream's part of each entry's detected_level (levels.go).
		stLevel, skipLevels := "", s.cfg.NoLogLevelDiscovery
		if !skipLevels {
			stLevel, skipLevels = streamLevel(labs)
		}
		key := labs.String()
		for j, e := range st.entries {
			if s.cfg.RejectOlderThan > 0 && e.Time < now-int64(s.cfg.RejectOlderThan) {
				rj.add(1, "too_old", "stream %d %s, entry %d: timestamp %s is older than %s", i, key, j, time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano), s.cfg.RejectOlderThan)
				continue
			}
			if s.cfg.RejectNewerThan > 0 && e.Time > now+int64(s.cfg.RejectNewerThan) {
				rj.add(1, "too_new", "stream %d %s, entry %d: timestamp %s is more than %s in the future", i, key, j, time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano), s.cfg.RejectNewerThan)
				continue
			}
			line := e.Line
			if len(line) > s.cfg.MaxLine {
				if !s.cfg.TruncateLines {
					n := len(line)
					if l, ok := st.lineLens[j]; ok {
						n = l
					}
					rj.add(1, "line_too_long", "stream %d %s, entry %d: line of %d bytes exceeds the limit of %d", i, key, j, n, s.cfg.MaxLine)
					continue
				}
				cut := max(0, s.cfg.MaxLine-len(truncMarker))
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut-- // do not split a UTF-8 sequence
				}
				line = append(line[:cut:cut], truncMarker...)
				cuts++
			}
			if r := st.metaErrs[j]; r != nil {
				rj.add(1, r.reason, "stream %d %s, entry %d: %s", i, key, j, r.msg)
				continue
			}
			a := e.Attrs
			if !skipLevels {
				// Of the line as pushed, before a cut.
				if l := entryLevel(stLevel, a, e.Line); l != "" {
					a = la.with(a, l)
				}
			}
			// In place, this writes at or before the entry just read.
			out = append(out, store.LabeledEntry{Labels: key, Time: e.Time, Line: line, Attrs: a})
		}
	}
	clear(out[len(out):cap(out)]) // refused lines need not stay reachable
	return out, cuts, rj
}

// inPlace returns, emptied, the array that holds the streams' entries
// one stream after another in order, as the decoders lay them out, so
// that validate can keep the valid entries in it: each is written at or
// before the place it was read from. It returns nil when the entries are
// not laid out so (jsonl's streams, or a decoder's count that was off and
// made append move the array); validate then copies them.
func inPlace(streams []pushStream) []store.LabeledEntry {
	var all []store.LabeledEntry
	var next *store.LabeledEntry // where the next stream's entries must start
	for _, st := range streams {
		es := st.entries
		if len(es) == 0 {
			continue
		}
		if all == nil {
			all = es[:0]
		} else if &es[0] != next {
			return nil
		}
		next = nil
		if cap(es) > len(es) {
			next = &es[:len(es)+1][len(es)]
		}
	}
	return all
}

// longLabel describes a label whose name or value is over the limits, as
// Loki bounds them (1 KiB and 2 KiB by default): a stream's labels are
// kept in every WAL record that defines it and in every segment's
// stream table, and one push of a huge label could otherwise exhaust
// memory or the WAL's record size.
func (s *Server) longLabel(labs ingest.Labels) string {
	for _, l := range labs {
		if len(l.Name) > s.cfg.MaxLabelNameBytes {
			return fmt.Sprintf("label name %.40q… of %d bytes exceeds the limit of %d", l.Name, len(l.Name), s.cfg.MaxLabelNameBytes)
		}
		if len(l.Value) > s.cfg.MaxLabelValueBytes {
			return fmt.Sprintf("label %s: value of %d bytes exceeds the limit of %d", l.Name, len(l.Value), s.cfg.MaxLabelValueBytes)
		}
	}
	return ""
}

func (s *Server) streamLabels(st pushStream) (ingest.Labels, error) {
	var labs ingest.Labels
	if st.lmap != nil {
		for k, v := range st.lmap {
			if !validLabelName(k) {
				return nil, fmt.Errorf("invalid label name %q", k)
			}
			if v == "" {
				continue // an empty value means no such label
			}
			labs = append(labs, ingest.Label{Name: k, Value: v})
		}
		slices.SortFunc(labs, func(a, b ingest.Label) int { return strings.Compare(a.Name, b.Name) })
	} else {
		t := strings.TrimSpace(st.labels)
		if !strings.HasPrefix(t, "{") {
			return nil, fmt.Errorf("labels %q: want Loki's form {name=\"value\", ...}", st.labels)
		}
		var err error
		if labs, err = ingest.ParsePushLabels(t); err != nil {
			return nil, fmt.Errorf("labels %q: %w", st.labels, err)
		}
	}
	if len(labs) == 0 {
		return nil, errors.New("at least one label is required")
	}
	return labs, nil
}

// serviceNameSources are the labels whose value becomes service_name
// when a pushed stream has none, first present first: Loki's default
// discover_service_name (limits_config, -validation.discover-service-name).
var serviceNameSources = []string{"service", "app", "application", "app_name", "name", "app_kubernetes_io_name",
	"container", "container_name", "k8s_container_name", "component", "workload", "job", "k8s_job_name"}

// discoverServiceName adds service_name to sorted labels that lack it,
// as Loki does at push: the value of the first of serviceNameSources
// present, else "unknown_service". Grafana's Logs Drilldown lists
// streams by service_name, so without it streams pushed with only app or
// job labels did not appear there. OTLP streams always have it
// (otlpLabels maps service.name).
func discoverServiceName(labs ingest.Labels) ingest.Labels {
	if labs.Get("service_name") != "" {
		return labs
	}
	for _, src := range serviceNameSources {
		if v := labs.Get(src); v != "" {
			return labs.With("service_name", v)
		}
	}
	return labs.With("service_name", "unknown_service")
}

func validLabelName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// pushTenant checks a push is a POST and returns its tenant; otherwise it
// has answered the request.
func (s *Server) pushTenant(w http.ResponseWriter, r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "use POST")
		return "", false
	}
	return s.tenant(w, r)
}

// handlePush serves the Loki push endpoint (JSON or protobuf+snappy) and
// the JSON-lines endpoint.
func (s *Server) handlePush(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		tenant, ok := s.pushTenant(w, r)
		if !ok {
			return
		}
		f, err := s.push(r, tenant, format)
		s.met.pushDur.WithLabelValues(f).Observe(time.Since(start).Seconds())
		if err != nil {
			var he *httpError
			if errors.As(err, &he) {
				s.met.rejected.WithLabelValues(he.reason).Inc()
				if ra := he.retryAfter(); ra != "" {
					w.Header().Set("Retry-After", ra)
				}
				writeError(w, he.status, he.msg)
				return
			}
			s.log.Error("push failed", "tenant", tenant, "err", err)
			writeError(w, http.StatusInternalServerError, "storing the push failed: "+err.Error()+"; its entries may or may not be stored")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// push stores a push body of the given format ("loki": JSON or protobuf
// as its Content-Type says) and returns the format it was read as.
func (s *Server) push(r *http.Request, tenant, format string) (string, error) {
	var body []byte
	rawRelease, err := s.admitRaw(r)
	if err != nil {
		return format, err
	}
	if format == "loki" {
		format, body, err = s.readLokiBody(r)
	} else {
		body, err = s.readBody(r, false)
	}
	rawRelease()
	if err != nil {
		return format, err
	}
	release, err := s.admitPush(r.Context(), int64(len(body)))
	if err != nil {
		return format, err
	}
	defer release()
	return format, s.store(r, tenant, format, body)
}

// readLokiBody reads a Loki push body: JSON when the Content-Type says
// so, protobuf (a snappy block) when it says x-protobuf; without either,
// JSON when the body starts with '{', else protobuf, as Loki reads
// anything that is not JSON as protobuf and clients send protobuf with
// no Content-Type or application/octet-stream.
func (s *Server) readLokiBody(r *http.Request) (format string, body []byte, err error) {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	switch {
	case strings.HasPrefix(ct, "application/x-protobuf"):
		body, err = s.readBody(r, true)
		return "protobuf", body, err
	case strings.Contains(ct, "json"):
		body, err = s.readBody(r, false)
		return "json", body, err
	}
	if body, err = s.readBody(r, false); err != nil {
		return "json", nil, err
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return "json", body, nil
	}
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "snappy") {
		// (With Content-Encoding: snappy, readBody has decoded it.)
		body, err = s.decodeSnappy(body)
	}
	return "protobuf", body, err
}

// store decodes, validates and appends a push body.
func (s *Server) store(r *http.Request, tenant, format string, body []byte) error {
	var err error
	var streams []pushStream
	switch format {
	case "protobuf":
		streams, err = decodePushProto(body)
	case "json":
		streams, err = decodePushJSON(body)
	default:
		streams, err = decodePushJSONL(body, s.cfg.Now().UnixNano())
	}
	if err != nil {
		return badRequest("malformed", "malformed %s push: %v; nothing was stored", format, err)
	}
	entries, cuts, rejects := s.validate(streams)
	if len(entries) == 0 {
		return rejects.err(0)
	}
	stored, sr, err := s.storeEntries(r.Context(), tenant, entries, cuts)
	if err != nil {
		return err
	}
	if sr != nil {
		return sr.err(rejects, stored)
	}
	return rejects.err(stored)
}

// storeEntries appends a push's validated entries to the tenant's store,
// leaving out those of new streams past the tenant's stream limit, and
// returns how many it stored and what the limit refused.
func (s *Server) storeEntries(ctx context.Context, tenant string, entries []store.LabeledEntry, cuts int) (int, *streamRefusal, error) {
	ts, err := s.openTenant(tenant, true)
	if err != nil {
		return 0, nil, err
	}
	var fp uint64
	now := s.cfg.Now().UnixNano()
	before := len(entries)
	if s.cfg.MaxStreamsPerTenant > 0 {
		fp = pushFingerprint(tenant, entries)
		entries = s.pushLim.skipStored(tenant, fp, entries, now)
	}
	// Entries an earlier attempt of a resent batch stored count as
	// stored in the answer, so that its counts add up to the batch.
	earlier := before - len(entries)
	entries, sr, undo := s.admitStreams(ts, entries)
	if len(entries) == 0 {
		return earlier, sr, nil
	}
	if err := ts.w.Append(ctx, entries); err != nil {
		// Stored or not, the streams this push made active are not to
		// count against the limit for 30 minutes on its account.
		undo()
		return 0, nil, err
	}
	if s.cfg.MaxStreamsPerTenant > 0 {
		s.pushLim.rememberPartial(tenant, fp, entries, sr != nil, now)
	}
	var nbytes, mbytes int64
	for _, e := range entries {
		nbytes += int64(len(e.Line))
		mbytes += int64(len(e.Attrs))
	}
	s.met.lines.Add(float64(len(entries)))
	s.met.bytes.Add(float64(nbytes))
	s.met.metaBytes.Add(float64(mbytes))
	// Cut lines count only once stored: a failed write stored nothing,
	// so cut nothing.
	if cuts > 0 {
		s.met.rejected.WithLabelValues("line_truncated").Add(float64(cuts))
	}
	return len(entries) + earlier, sr, nil
}

// pushLimiter holds what pushes share across requests: the new streams
// being appended under the tenant stream limit and the in-flight push
// budget. Its zero value is ready.
type pushLimiter struct {
	mu sync.Mutex
	// active holds, by tenant and canonical labels, when each stream was
	// last admitted (Config.Now, ns): the streams admitted within
	// streamActiveWindow are the tenant's active streams, which the
	// stream limit counts. A stream is marked when its push is admitted,
	// before its Append, so concurrent pushes cannot together pass the
	// limit.
	active map[string]map[string]int64
	pruned map[string]int64 // by tenant: when active was last pruned past 2 × the limit
	// partial remembers the pushes answered 429 by the stream limit after
	// some of their streams were stored (by fingerprint, see
	// pushFingerprint): shippers resend such a batch whole, and its
	// stored streams are then skipped instead of stored twice.
	partial map[string]map[uint64]*partialPush // by tenant

	// The in-flight push budget (admitPush): decompressed body bytes of
	// the pushes being decoded and stored, of those waiting for budget,
	// and the most ever in flight (tests check it).
	inflight, waiting, peak int64
	freed                   chan struct{} // closed (and replaced) when budget is released; nil if none waits
}

// defaultInflightPushBytes bounds the decompressed push bodies decoded
// and stored at once when Config leaves MaxInflightPushBytes 0: 256 MiB,
// the largest single body the default limits admit (4 × the 64 MiB
// --max-body once decompressed), so no push that is valid alone is
// refused for its size. Storing a push holds several times its
// decompressed body (measured, docs/BENCHMARKS.md: ~13× for one-byte
// lines, 17-byte protobuf entries of ~220 bytes of memory each; ~6× for
// 22-byte lines; less for longer lines, whose bytes dominate; with the
// detected_level pair every entry gets by default, levels.go, one-byte
// lines take ~480 bytes each, ~28×), so this keeps a burst of pushes to
// a few GB at worst instead of unbounded (finding E4).
const defaultInflightPushBytes = 256 << 20

// defaultPushQueueWait is how long a push waits for budget by default:
// pushes take milliseconds to a few seconds, and shippers time out after
// 10 s or more (Promtail's and Alloy's default), so a burst queues
// instead of failing, while a server that stays full answers 429 soon
// enough for the shipper to back off.
const defaultPushQueueWait = 5 * time.Second

// admitRaw takes budget for a push body as sent, before it is read, when
// the request declares its length (most shippers do): many clients
// sending large bodies at once would otherwise all be read into memory
// before their decompressed sizes are known. Once read, the body is
// admitted again by its decompressed size (admitPush) after this is
// released, so no push holds budget while it waits for more. A body of
// unknown length (chunked) is bounded only by --max-body while read.
func (s *Server) admitRaw(r *http.Request) (func(), error) {
	if r.ContentLength <= 0 {
		return func() {}, nil
	}
	return s.admitPush(r.Context(), min(r.ContentLength, s.cfg.MaxBody))
}

// inflightLimit is the in-flight push budget in bytes (< 0: none).
func (s *Server) inflightLimit() int64 {
	if s.cfg.MaxInflightPushBytes == 0 {
		return defaultInflightPushBytes
	}
	return s.cfg.MaxInflightPushBytes
}

// admitPush takes n bytes of the in-flight push budget for a push whose
// body decompressed to n bytes, waiting up to PushQueueWait for pushes in
// flight to release theirs. A body larger than the whole budget gets 413;
// a push that cannot get budget in time, or arrives while pushes of as
// many bytes as the budget already wait (they hold their bodies too),
// 429 with Retry-After. The returned release gives the bytes back.
func (s *Server) admitPush(ctx context.Context, n int64) (func(), error) {
	limit := s.inflightLimit()
	if limit < 0 {
		return func() {}, nil
	}
	if n > limit {
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, reason: "inflight_too_large", msg: fmt.Sprintf(
			"push body of %d bytes (as sent or decompressed) exceeds --max-inflight-push-bytes (%d), the push bytes the server processes at once; nothing was stored; split the batch", n, limit)}
	}
	wait := s.cfg.PushQueueWait
	if wait == 0 {
		wait = defaultPushQueueWait
	}
	pl := &s.pushLim
	busy := func(inflight int64) error {
		return &httpError{status: http.StatusTooManyRequests, reason: "push_budget", msg: fmt.Sprintf(
			"too many push bytes in flight (%d of --max-inflight-push-bytes %d; waited up to %s); nothing was stored; retry shortly", inflight, limit, max(wait, 0))}
	}
	var expired <-chan time.Time
	waiting := false
	pl.mu.Lock()
	for pl.inflight+n > limit {
		if !waiting {
			if wait < 0 || pl.waiting+n > limit {
				inflight := pl.inflight
				pl.mu.Unlock()
				return nil, busy(inflight)
			}
			waiting = true
			pl.waiting += n
			t := time.NewTimer(wait)
			defer t.Stop()
			expired = t.C
		}
		if pl.freed == nil {
			pl.freed = make(chan struct{})
		}
		freed := pl.freed
		pl.mu.Unlock()
		select {
		case <-freed:
			pl.mu.Lock()
			continue
		case <-expired:
		case <-ctx.Done():
		}
		pl.mu.Lock()
		pl.waiting -= n
		inflight := pl.inflight
		pl.mu.Unlock()
		return nil, busy(inflight)
	}
	if waiting {
		pl.waiting -= n
	}
	pl.inflight += n
	pl.peak = max(pl.peak, pl.inflight)
	pl.mu.Unlock()
	return func() {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		pl.inflight -= n
		if pl.freed != nil {
			close(pl.freed)
			pl.freed = nil
		}
	}, nil
}

// streamRefusal is what the tenant stream limit refused of a push.
type streamRefusal struct {
	tenant           string
	limit, have      int    // the limit; the tenant's active streams with this push's admitted
	streams, entries int    // refused
	first            string // labels of the first stream refused
}

// err is the 429 that answers a push with streams refused by the limit,
// worded as Loki's ("Maximum active stream limit exceeded ..."), with
// the entries validate refused, if any.
func (sr *streamRefusal) err(rj *pushRejects, stored int) error {
	more := ""
	if sr.streams > 1 {
		more = fmt.Sprintf(" (and %d more new streams)", sr.streams-1)
	}
	msg := fmt.Sprintf("Maximum active stream limit exceeded when trying to create stream %s%s: tenant '%s' has %d active streams (pushed to in the last %s), its limit is %d (--max-streams-per-tenant); reduce the number of streams (fewer labels or label values) or raise the limit; %d entries of %d new streams refused",
		sr.first, more, sr.tenant, sr.have, shortDuration(streamActiveWindow), sr.limit, sr.entries, sr.streams)
	refused := sr.entries
	if rj.entries > 0 {
		msg += "; " + strings.Join(rj.msgs, "; ")
		if rj.entries > len(rj.msgs) {
			msg += "; …"
		}
		refused += rj.entries
	}
	switch {
	case stored == 0:
		msg += "; nothing was stored"
	case rj.entries == 0:
		msg += fmt.Sprintf(", the other %d stored", stored)
	default:
		msg += fmt.Sprintf("; %d entries refused in all, the other %d stored", refused, stored)
	}
	return &httpError{status: http.StatusTooManyRequests, reason: "stream_limit", msg: msg}
}

// streamActiveWindow is how long a stream counts as active after its last
// push: Loki counts the streams its ingesters hold in memory, which they
// let go after chunk_idle_period (30 minutes by default) without entries.
// Counting every stream a tenant ever had instead refused every new
// stream for good once pods had come and gone 5,000 times.
const streamActiveWindow = 30 * time.Minute

// admitStreams applies the tenant stream limit to a push's validated
// entries. Those of streams the tenant's store already holds are always
// stored (as in Loki, a stream it has in memory is never refused); a new
// stream is admitted while the tenant has fewer than the limit of active
// streams (pushed to within streamActiveWindow), in the push's order.
// The admitted entries are returned, filtered in place; the others are
// described by the refusal (nil if none).
func (s *Server) admitStreams(ts *tenantStore, entries []store.LabeledEntry) ([]store.LabeledEntry, *streamRefusal, func()) {
	limit := s.cfg.MaxStreamsPerTenant
	if limit <= 0 {
		return entries, nil, func() {}
	}
	// The push's streams, in order of first entry.
	idx := map[string]int{}
	var keys []string
	for _, e := range entries {
		if _, ok := idx[e.Labels]; !ok {
			idx[e.Labels] = len(keys)
			keys = append(keys, e.Labels)
		}
	}
	known := make([]bool, len(keys))
	ts.w.KnownStreams(keys, known)
	now := s.cfg.Now().UnixNano()
	pl := &s.pushLim
	pl.mu.Lock()
	if pl.active == nil {
		pl.active = map[string]map[string]int64{}
		pl.pruned = map[string]int64{}
	}
	act := pl.active[ts.name]
	if act == nil {
		act = map[string]int64{}
		pl.active[ts.name] = act
	}
	pruned := false
	prune := func() {
		if !pruned {
			pruned = true
			for k, at := range act {
				if now-at > int64(streamActiveWindow) {
					delete(act, k)
				}
			}
		}
	}
	var refused map[string]bool
	var added []string // new to act: undone if the Append fails
	for i, k := range keys {
		if _, ok := act[k]; ok || known[i] {
			act[k] = now
			continue
		}
		if len(act) >= limit {
			prune()
		}
		if len(act) < limit {
			act[k] = now
			added = append(added, k)
			continue
		}
		if refused == nil {
			refused = map[string]bool{}
		}
		refused[k] = true
	}
	if len(act) > 2*limit && now-pl.pruned[ts.name] > int64(time.Minute) {
		// Streams of the store only, idle since; at most once a minute,
		// since it walks the whole map under the lock all pushes share.
		prune()
		pl.pruned[ts.name] = now
	}
	if len(act) == 0 {
		delete(pl.active, ts.name)
	}
	have := len(act)
	pl.mu.Unlock()
	undo := func() {
		if len(added) == 0 {
			return
		}
		pl.mu.Lock()
		defer pl.mu.Unlock()
		a := pl.active[ts.name]
		for _, k := range added {
			if a[k] == now { // not pushed to again since
				delete(a, k)
			}
		}
	}
	if refused == nil {
		return entries, nil, undo
	}
	sr := &streamRefusal{tenant: ts.name, limit: limit, have: have, streams: len(refused)}
	for _, k := range keys {
		if refused[k] {
			sr.first = k
			break
		}
	}
	kept := entries[:0]
	for _, e := range entries {
		if refused[e.Labels] {
			sr.entries++
			continue
		}
		kept = append(kept, e)
	}
	clear(entries[len(kept):]) // the refused lines need not stay reachable
	return kept, sr, undo
}

// partialPush is a push the stream limit answered 429 after storing the
// entries of some of its streams.
type partialPush struct {
	streams map[string]bool // stored
	at      int64           // when (Config.Now, ns)
}

// Bounds of pushLimiter.partial: shippers retry within minutes (Promtail
// and Alloy back off up to 5 minutes), and each record is a push's
// stream names; each tenant keeps its own records, so one tenant's
// traffic does not push out another's.
const (
	maxPartialPushes = 256 // a tenant
	partialPushTTL   = 15 * time.Minute
)

// fingerprintSeed seeds pushFingerprint for the process's life.
var fingerprintSeed = maphash.MakeSeed()

// pushFingerprint identifies a push by its tenant and validated entries,
// so that a resent batch is recognised whatever its encoding. (Entries
// without a timestamp, as JSON lines may send, take the time they arrive,
// so their resends are new pushes.)
func pushFingerprint(tenant string, entries []store.LabeledEntry) uint64 {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	h.WriteString(tenant)
	var n [8]byte
	for _, e := range entries {
		h.WriteByte(0)
		h.WriteString(e.Labels)
		binary.LittleEndian.PutUint64(n[:], uint64(e.Time))
		h.Write(n[:])
		binary.LittleEndian.PutUint64(n[:], uint64(len(e.Line)))
		h.Write(n[:])
		h.Write(e.Line)
		// The metadata too: entries differing only in it are other
		// entries (its encoding is canonical, so equal sets hash equal).
		binary.LittleEndian.PutUint64(n[:], uint64(len(e.Attrs)))
		h.Write(n[:])
		h.Write(e.Attrs)
	}
	return h.Sum64()
}

// skipStored drops, from a push seen before (fp) that the stream limit
// answered 429 after storing some of its streams, within partialPushTTL,
// the entries of those streams: the shipper resent the batch whole.
func (pl *pushLimiter) skipStored(tenant string, fp uint64, entries []store.LabeledEntry, now int64) []store.LabeledEntry {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p := pl.partial[tenant][fp]
	if p == nil || now-p.at > int64(partialPushTTL) {
		return entries
	}
	kept := entries[:0]
	for _, e := range entries {
		if !p.streams[e.Labels] {
			kept = append(kept, e)
		}
	}
	clear(entries[len(kept):])
	return kept
}

// rememberPartial records, for a push answered 429 by the stream limit
// (refused), the streams of its entries stored now, for a resend to skip;
// a push stored whole is forgotten.
func (pl *pushLimiter) rememberPartial(tenant string, fp uint64, stored []store.LabeledEntry, refused bool, now int64) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	recs := pl.partial[tenant]
	if !refused {
		if recs != nil {
			delete(recs, fp)
			if len(recs) == 0 {
				delete(pl.partial, tenant)
			}
		}
		return
	}
	if recs == nil {
		if pl.partial == nil {
			pl.partial = map[string]map[uint64]*partialPush{}
		}
		recs = map[uint64]*partialPush{}
		pl.partial[tenant] = recs
	}
	p := recs[fp]
	if p == nil {
		if len(recs) >= maxPartialPushes {
			var oldest uint64
			first := true
			for k, q := range recs {
				if now-q.at > int64(partialPushTTL) {
					delete(recs, k)
				} else if first || q.at < recs[oldest].at {
					oldest, first = k, false
				}
			}
			if len(recs) >= maxPartialPushes {
				delete(recs, oldest)
			}
		}
		p = &partialPush{streams: map[string]bool{}}
		recs[fp] = p
	}
	p.at = now
	for _, e := range stored {
		p.streams[e.Labels] = true
	}
}

// shortDuration writes d without zero units: 30m, not 30m0s.
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}
