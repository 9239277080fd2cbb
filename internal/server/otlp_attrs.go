package server

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"haystack/internal/attrs"
)

// The structured metadata of OTLP records, as Loki 3's OTLP ingestion
// makes it (pkg/loghttp/push/otlplabels; its docs' "Format
// considerations" name the parts): each record's own attributes and
// fields, then its resource's attributes that are not stream labels and
// its scope's attributes and fields, which every record of the resource
// and scope repeats. Names are normalized by metaName; values are
// rendered as the collector's AsString renders them, maps flattened.

// otlpAttrPairs appends the metadata pairs of attributes kvs to dst: a
// map value is flattened into one pair a key, its name the parent's and
// the key's joined by '_' (an empty map gives none), each name normalized
// at each level as Loki normalizes it. skip leaves out keys.
//
// Past otlpCompactPairs pairs, the pairs so far are compacted
// (compactPairs): of a name only the last pair is kept, as encode keeps
// it, so that a list of a million attributes of a few names does not
// hold a million pairs.
func otlpAttrPairs(me *metaEncoder, dst []attrs.Pair, kvs *otlpAttrs, skip func(string) bool) ([]attrs.Pair, error) {
	var err error
	base := len(dst)
	next := base + otlpCompactPairs
	// The flattened names' budget: see otlpFlat.
	fl := otlpFlat{budget: attrs.MaxBytes}
	kvs.each(func(key string, val otlpValue) bool {
		if skip != nil && skip(key) {
			return true
		}
		if val.kind == otlpMap {
			fl.budget += otlpFlatFactor * (len(key) + len(val.bytes))
		}
		if dst, err = otlpAttrPair(me, &fl, dst, key, val, ""); err != nil {
			return false
		}
		if len(dst) >= next {
			dst = compactPairs(me, dst, base)
			next = len(dst) + max(otlpCompactPairs, len(dst)-base)
		}
		return true
	})
	return dst, err
}

// otlpCompactPairs is how many pairs otlpAttrPairs collects before it
// compacts them.
const otlpCompactPairs = 1024

// compactPairs keeps, of the pairs dst[base:] (names normalized) of one
// name, only the last, as encode would (a later pair of the name wins),
// counting in me.collisions the names given twice with different values
// as encode counts them (each change of value from one pair of the name
// to the next). Empty values are kept: a later empty value drops the
// name in encode.
func compactPairs(me *metaEncoder, dst []attrs.Pair, base int) []attrs.Pair {
	ps := dst[base:]
	slices.SortStableFunc(ps, func(a, b attrs.Pair) int { return strings.Compare(a.Name, b.Name) })
	out := ps[:0]
	for i, p := range ps {
		if i+1 < len(ps) && ps[i+1].Name == p.Name {
			if ps[i+1].Value != p.Value {
				me.collisions++
			}
			continue
		}
		out = append(out, p)
	}
	clear(ps[len(out):])
	return dst[:base+len(out)]
}

// otlpFlat bounds the bytes of the names otlpAttrPair builds by
// flattening maps (prefix+"_"+key for each entry) for one list of
// attributes: a long key over a map of many entries named one pair an
// entry with a copy of the key each, key length x entries bytes (a
// 1 MB key over 65,536 two-byte entries: 64 GB) before encode saw
// them. budget is attrs.MaxBytes, plus otlpFlatFactor times the request
// bytes of each map-valued attribute (its key and its map); each name
// built is charged its length before it is built, and past the budget
// the attribute is refused as errMetaTooLarge. A map's entries of one
// key get one name, built and charged once (under a prefix of
// otlpFlatCacheMin bytes or more, for the map's first otlpFlatCache
// keys): a 20 KB key over 4,000 entries of one key builds one name of
// 20 KB, the pair encode keeps.
//
// Only names that come to more than otlpFlatFactor times their request
// bytes (prefixes of 16 bytes or more over many entries: a name is at
// most prefix+1+key bytes, an entry at least key+2) and more than
// attrs.MaxBytes in all can be refused: the pairs of such a list are
// more than attrs.MaxPairs or attrs.MaxBytes unless most are empty or
// repeat a name, so the entry is refused either way but for those.
type otlpFlat struct {
	budget int
}

// otlpFlatFactor is how many bytes of flattened names a byte of a map
// attribute may name.
const otlpFlatFactor = 8

// otlpFlatCache is how many keys of a map otlpAttrPair remembers the
// names of, for prefixes of otlpFlatCacheMin bytes or more (shorter ones
// are within otlpFlatFactor of their entries' bytes without).
const (
	otlpFlatCache    = 256
	otlpFlatCacheMin = 16
)

// otlpAttrPair appends the pairs of attribute key (under prefix, the
// normalized name of the map it is in) to dst. name, when not "", is the
// attribute's normalized name (prefix's and key's, built by the caller).
func otlpAttrPair(me *metaEncoder, fl *otlpFlat, dst []attrs.Pair, key string, val otlpValue, prefix string) ([]attrs.Pair, error) {
	name := key
	if prefix != "" {
		name = prefix + "_" + key
	}
	n, err := me.name(name)
	if err != nil {
		return dst, fmt.Errorf("attribute %q: %w", key, err)
	}
	return otlpAttrNamed(me, fl, dst, key, n, val)
}

// otlpAttrNamed is otlpAttrPair for attribute key of normalized name n.
func otlpAttrNamed(me *metaEncoder, fl *otlpFlat, dst []attrs.Pair, key, n string, val otlpValue) ([]attrs.Pair, error) {
	if val.kind == otlpTooLarge {
		return dst, fmt.Errorf("attribute %q: %w: more than %d values in its arrays and maps", key, errMetaTooLarge, otlpAttrMaxValues)
	}
	if val.kind == otlpMap {
		var cache map[string]string // key -> normalized name
		var err error
		val.eachKV(func(k string, e otlpValue) bool {
			en, ok := cache[k]
			if !ok {
				// Charged before it is built.
				if fl.budget -= len(n) + 1 + len(k); fl.budget < 0 {
					err = fmt.Errorf("attribute %q: %w: the names of its maps' entries (%q joined to each key) come to more than %d times its size", key, errMetaTooLarge, otlpTrim(n), otlpFlatFactor)
					return false
				}
				if en, err = me.name(n + "_" + k); err != nil {
					err = fmt.Errorf("attribute %q: %w", k, err)
					return false
				}
				if len(n) >= otlpFlatCacheMin && len(cache) < otlpFlatCache {
					if cache == nil {
						cache = map[string]string{}
					}
					cache[k] = en
				}
			}
			dst, err = otlpAttrNamed(me, fl, dst, k, en, e)
			return err == nil
		})
		return dst, err
	}
	v, ok := val.render(attrs.MaxBytes)
	if !ok {
		return dst, fmt.Errorf("attribute %q: %w: its value renders to more than %d bytes", key, errMetaTooLarge, attrs.MaxBytes)
	}
	return append(dst, attrs.Pair{Name: n, Value: v}), nil
}

// otlpTrim is s, or its first 64 bytes and "...", for a message.
func otlpTrim(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

// otlpResourcePairs is the metadata every record of r repeats: its
// attributes that are not stream labels.
func otlpResourcePairs(me *metaEncoder, r *otlpResource) ([]attrs.Pair, error) {
	return otlpAttrPairs(me, nil, &r.attrs, func(k string) bool { return otlpIndexAttributes[k] })
}

// otlpScopePairs is the metadata every record of sc repeats.
func otlpScopePairs(me *metaEncoder, sc *otlpScope) ([]attrs.Pair, error) {
	p, err := otlpAttrPairs(me, nil, &sc.attrs, nil)
	if err != nil {
		return nil, err
	}
	if len(sc.name) > 0 {
		p = append(p, attrs.Pair{Name: "scope_name", Value: string(sc.name)})
	}
	if len(sc.version) > 0 {
		p = append(p, attrs.Pair{Name: "scope_version", Value: string(sc.version)})
	}
	if sc.dropped != 0 {
		p = append(p, attrs.Pair{Name: "scope_dropped_attributes_count", Value: strconv.FormatUint(sc.dropped, 10)})
	}
	return p, nil
}

// otlpRecordPairs appends a record's own metadata to dst.
func otlpRecordPairs(me *metaEncoder, dst []attrs.Pair, rec *otlpRecord) ([]attrs.Pair, error) {
	var skip func(string) bool
	if len(rec.eventName) > 0 {
		// The record's event_name field wins over an attribute of
		// that name, as in Loki.
		skip = func(k string) bool { return k == "event_name" }
	}
	dst, err := otlpAttrPairs(me, dst, &rec.attrs, skip)
	if err != nil {
		return dst, err
	}
	if rec.time != 0 && rec.observed != 0 {
		// (With no time, the observed time is the entry's time.)
		dst = append(dst, attrs.Pair{Name: "observed_timestamp", Value: strconv.FormatUint(rec.observed, 10)})
	}
	if rec.sevNum != 0 {
		dst = append(dst, attrs.Pair{Name: "severity_number", Value: strconv.FormatInt(rec.sevNum, 10)})
	}
	if len(rec.sevText) > 0 {
		dst = append(dst, attrs.Pair{Name: "severity_text", Value: string(rec.sevText)})
	}
	if rec.dropped != 0 {
		dst = append(dst, attrs.Pair{Name: "dropped_attributes_count", Value: strconv.FormatUint(rec.dropped, 10)})
	}
	if rec.flags != 0 {
		dst = append(dst, attrs.Pair{Name: "flags", Value: strconv.FormatUint(rec.flags, 10)})
	}
	if id := rec.traceID; len(id) > 0 && !allZero(id) {
		dst = append(dst, attrs.Pair{Name: "trace_id", Value: hex.EncodeToString(id)})
	}
	if id := rec.spanID; len(id) > 0 && !allZero(id) {
		dst = append(dst, attrs.Pair{Name: "span_id", Value: hex.EncodeToString(id)})
	}
	if len(rec.eventName) > 0 {
		dst = append(dst, attrs.Pair{Name: "event_name", Value: string(rec.eventName)})
	}
	return dst, nil
}

// errMetaTooLarge marks an attribute whose value alone is over attrs'
// size limit.
var errMetaTooLarge = errors.New("structured metadata too large")

// allZero reports whether an id is all zero bytes: OTLP's "no id".
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// otlpSharedMetaBytes is about how many bytes the metadata the records
// of res repeat from their resources and scopes comes to over all the
// records: a small request can expand to much more (a 1 KiB resource
// repeated by 100,000 one-byte records), so the push budget counts it.
func otlpSharedMetaBytes(res []otlpResource) int64 {
	var total int64
	var me metaEncoder
	for i := range res {
		r := &res[i]
		rp, _ := otlpResourcePairs(&me, r)
		rs := pairsSize(rp)
		for j := range r.scopes {
			sc := &r.scopes[j]
			sp, _ := otlpScopePairs(&me, sc)
			total += int64(rs+pairsSize(sp)) * int64(len(sc.records))
		}
	}
	return total
}

// pairsSize is the most bytes pairs take in attrs' encoding.
func pairsSize(ps []attrs.Pair) int {
	n := 0
	for _, p := range ps {
		n += len(p.Name) + len(p.Value) + 2*binaryMaxVarintLen32
	}
	return n
}

// binaryMaxVarintLen32 bounds a uvarint of a length under 4 GiB.
const binaryMaxVarintLen32 = 5

// otlpStreams turns decoded resources into push streams, one a resource,
// each record an entry with its structured metadata. A record whose time
// does not fit Unix nanoseconds (after 2262), or whose metadata cannot be
// kept (an attribute name Loki's normalization refuses, attrs' limits),
// is refused into rj. Of pairs given one name, the later wins, in Loki's
// order: the record's attributes, its fields, its resource's attributes,
// its scope's attributes and fields. A body that is not a string is kept
// to its first maxLine+1 bytes (maxLine < 0: whole).
func otlpStreams(res []otlpResource, now int64, maxLine int, rj *pushRejects) []pushStream {
	out := make([]pushStream, 0, len(res))
	n := 0
	for i := range res {
		n += res[i].nrecords()
	}
	all := make([]pushEntry, 0, n) // every stream's entries, in order (inPlace)
	var me metaEncoder
	var scratch []attrs.Pair
	for i := range res {
		r := &res[i]
		ps := pushStream{lmap: otlpLabels(&r.attrs)}
		start := len(all)
		// The collisions compactPairs counts inside the resource's and
		// scope's pairs are counted for each record, as encode counted
		// them in each record's pairs.
		c0 := me.collisions
		rp, rerr := otlpResourcePairs(&me, r)
		rcoll := me.collisions - c0
		me.collisions = c0
		j := 0 // record number in the resource, for messages
		for k := range r.scopes {
			sc := &r.scopes[k]
			c1 := me.collisions
			sp, serr := otlpScopePairs(&me, sc)
			scoll := me.collisions - c1
			me.collisions = c1
			var sh *otlpShared
			if rerr == nil && serr == nil && len(rp)+len(sp) > attrs.MaxPairs && len(sc.records) > 1 {
				// Sorting in place keeps encode's results (see
				// newOTLPShared).
				slices.SortStableFunc(rp, byName)
				slices.SortStableFunc(sp, byName)
				sh = newOTLPShared(rp, sp)
			}
			for l := range sc.records {
				rec := &sc.records[l]
				j++
				ts := rec.time
				if ts == 0 {
					ts = rec.observed
				}
				if ts > math.MaxInt64 {
					rj.add(1, "bad_timestamp", "resource %d, log record %d: time %d ns is past the year 2262", i, j-1, ts)
					continue
				}
				var err error
				scratch, err = otlpRecordPairs(&me, scratch[:0], rec)
				switch {
				case rerr != nil:
					err = fmt.Errorf("resource %w", rerr)
				case serr != nil:
					err = fmt.Errorf("scope %w", serr)
				}
				if err != nil {
					reason := "bad_metadata"
					if errors.Is(err, errMetaTooLarge) {
						reason = "structured_metadata_too_large"
					}
					rj.add(1, reason, "resource %d, log record %d: structured metadata: %v", i, j-1, err)
					continue
				}
				me.collisions += rcoll + scoll
				if sh != nil {
					// The shared pairs alone are over the limit: the
					// record is refused without encoding them again.
					var refusal *metaRefusal
					if scratch, refusal = sh.refuse(&me, scratch); refusal != nil {
						rj.add(1, refusal.reason, "resource %d, log record %d: %s", i, j-1, refusal.msg)
						continue
					}
				}
				scratch = append(append(scratch, rp...), sp...)
				e := pushEntry{Time: int64(ts)}
				if ts == 0 {
					e.Time = now
				}
				var refusal *metaRefusal
				if e.Attrs, refusal = me.encode(scratch); refusal != nil {
					rj.add(1, refusal.reason, "resource %d, log record %d: %s", i, j-1, refusal.msg)
					continue
				}
				if rec.body.kind == otlpString {
					e.Line = rec.body.bytes
				} else {
					// At most maxLine+1 bytes: past --max-line the line
					// is refused or cut (validate), and an array of
					// millions of values rendered whole cost 2.5x its
					// size or more.
					var n int
					e.Line, n = rec.body.text(maxLine)
					if n > len(e.Line) {
						if ps.lineLens == nil {
							ps.lineLens = map[int]int{}
						}
						ps.lineLens[len(all)-start] = n
					}
				}
				all = append(all, e)
			}
		}
		ps.entries = all[start:]
		ps.collisions = me.takeCollisions()
		out = append(out, ps)
	}
	return out
}

// otlpShared is the pairs the records of a scope repeat (its resource's
// rp, then its own sp, after each record's), resolved once, for when
// they alone are more than attrs.MaxPairs names: every record of the
// scope is then refused, and encoding the shared pairs again for each (a
// resource map of 20,000 keys over 600 records: 12 million pairs sorted)
// only counted them again.
type otlpShared struct {
	rp, sp []attrs.Pair // each sorted by name (stable)
	live   int          // names whose last value is not empty
	coll   int          // collisions among the shared pairs, as encode counts them
}

// byName orders pairs by name.
func byName(a, b attrs.Pair) int { return strings.Compare(a.Name, b.Name) }

// otlpRun is the end of the run of pairs of ps[i]'s name (ps sorted),
// and the changes of value in it.
func otlpRun(ps []attrs.Pair, i int) (end, changes int) {
	j := i
	for j+1 < len(ps) && ps[j+1].Name == ps[i].Name {
		if ps[j+1].Value != ps[j].Value {
			changes++
		}
		j++
	}
	return j + 1, changes
}

// newOTLPShared resolves rp then sp, each sorted by name (stable: the
// pairs of one name keep their order, so encode's order of a record's
// pairs, rp's and sp's is the same); nil unless more than
// attrs.MaxPairs names are left with a value.
func newOTLPShared(rp, sp []attrs.Pair) *otlpShared {
	sh := &otlpShared{rp: rp, sp: sp}
	i, k := 0, 0
	for i < len(rp) || k < len(sp) {
		var c int
		switch {
		case i == len(rp):
			c = 1
		case k == len(sp):
			c = -1
		default:
			c = strings.Compare(rp[i].Name, sp[k].Name)
		}
		last := ""
		if c <= 0 {
			e, ch := otlpRun(rp, i)
			sh.coll += ch
			last = rp[e-1].Value
			i = e
		}
		if c >= 0 {
			e, ch := otlpRun(sp, k)
			sh.coll += ch
			if c == 0 && last != sp[k].Value {
				sh.coll++
			}
			last = sp[e-1].Value
			k = e
		}
		if last != "" {
			sh.live++
		}
	}
	if sh.live <= attrs.MaxPairs {
		return nil
	}
	return sh
}

// first is the first shared value of name, if the shared pairs name it.
func (sh *otlpShared) first(name string) (string, bool) {
	for _, ps := range [][]attrs.Pair{sh.rp, sh.sp} {
		if k, ok := slices.BinarySearchFunc(ps, name, func(p attrs.Pair, n string) int { return strings.Compare(p.Name, n) }); ok {
			return ps[k].Value, true
		}
	}
	return "", false
}

// refuse is encode's refusal of a record's own pairs rec followed by the
// shared pairs, and counts the collisions encode would count. rec's
// names are normalized and reordered (returned).
func (sh *otlpShared) refuse(me *metaEncoder, rec []attrs.Pair) ([]attrs.Pair, *metaRefusal) {
	for i := range rec {
		n, err := me.name(rec[i].Name)
		if err != nil {
			return rec, &metaRefusal{"bad_metadata", fmt.Sprintf("structured metadata: %v", err)}
		}
		rec[i].Name = n
	}
	slices.SortStableFunc(rec, byName)
	n, coll := sh.live, sh.coll
	for i := 0; i < len(rec); {
		e, ch := otlpRun(rec, i)
		coll += ch
		if first, ok := sh.first(rec[i].Name); ok {
			// The shared pair wins; the record's last and the shared
			// first are neighbours in encode's order.
			if rec[e-1].Value != first {
				coll++
			}
		} else if rec[e-1].Value != "" {
			n++
		}
		i = e
	}
	me.collisions += coll
	return rec, &metaRefusal{"structured_metadata_too_many", fmt.Sprintf("%d structured metadata pairs, more than the limit of %d", n, attrs.MaxPairs)}
}
