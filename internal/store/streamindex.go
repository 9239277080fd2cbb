package store

import (
	"slices"
	"sort"
	"sync"

	"haystack/internal/ingest"
)

// StreamIndex is a view's stream table with an inverted index: for each
// label name and value, the ids of the streams that have it (postings,
// ascending). A stream selector's equality matcher is one lookup instead
// of parsing every stream's labels (E9: a one-stream query over 200,000
// streams spent 0.2-1 s parsing them all).
//
// The index is built lazily, by the first reader that needs it, and then
// kept by the store and extended as readers see new streams: stream
// labels never change and ids only grow, so nothing invalidates it, and
// neither the write path nor a store's open pays for it. A StreamIndex
// shows the streams of its view only (ids below Len), whatever later
// views have added.
//
// Memory: about 30 bytes per distinct (name, value) pair plus 4 bytes per
// (stream, label) that shares its value with other streams; values and
// names are substrings of the stream table's label texts, not copies
// (unless the text escapes them).
type StreamIndex struct {
	x    *streamIndex
	defs []StreamDef // index = stream id
}

// streamIndex is the shared, growing part of a StreamIndex.
type streamIndex struct {
	mu    sync.RWMutex
	n     int // streams indexed: ids 0..n-1
	names map[string]*nameIndex
	bad   []uint32 // streams whose labels do not parse, ascending
}

// nameIndex holds the postings of one label name.
type nameIndex struct {
	// vals maps a value to the id of the only stream with it, or, with
	// the many bit set, to the index in lists of its postings: most
	// values (pod names, ids) belong to one stream, and a map of uint32
	// costs half of one of slices.
	vals  map[string]uint32
	lists [][]uint32
	first uint32 // the smallest id with this name
}

// many marks a nameIndex.vals entry that indexes lists.
const many = 1 << 31

func newStreamIndex() *streamIndex {
	return &streamIndex{names: map[string]*nameIndex{}}
}

// catchUp indexes defs beyond those already indexed. defs[i] is stream i.
func (x *streamIndex) catchUp(defs []StreamDef) {
	x.mu.RLock()
	done := x.n >= len(defs)
	x.mu.RUnlock()
	if done {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for ; x.n < len(defs); x.n++ {
		x.add(uint32(x.n), defs[x.n].Labels)
	}
}

func (x *streamIndex) add(id uint32, text string) {
	ls, err := ingest.ParseLabels(text)
	if err != nil {
		x.bad = append(x.bad, id)
		return
	}
	for _, l := range ls {
		ni := x.names[l.Name]
		if ni == nil {
			ni = &nameIndex{vals: map[string]uint32{}, first: id}
			x.names[l.Name] = ni
		}
		old, ok := ni.vals[l.Value]
		switch {
		case !ok && id < many:
			ni.vals[l.Value] = id
		case !ok:
			ni.vals[l.Value] = many | uint32(len(ni.lists))
			ni.lists = append(ni.lists, []uint32{id})
		case old&many == 0:
			ni.vals[l.Value] = many | uint32(len(ni.lists))
			ni.lists = append(ni.lists, []uint32{old, id})
		default:
			i := old &^ many
			ni.lists[i] = append(ni.lists[i], id)
		}
	}
}

// newStreamIndexFor returns defs' StreamIndex, indexing what x lacks.
func newStreamIndexFor(x *streamIndex, defs []StreamDef) *StreamIndex {
	x.catchUp(defs)
	return &StreamIndex{x: x, defs: defs}
}

// Len is the number of streams: ids 0..Len()-1.
func (ix *StreamIndex) Len() int { return len(ix.defs) }

// Labels returns the canonical labels of stream id ("" if unknown).
func (ix *StreamIndex) Labels(id uint32) string {
	if int(id) < len(ix.defs) {
		return ix.defs[id].Labels
	}
	return ""
}

// below returns the prefix of the ascending ids that is below n.
func below(ids []uint32, n int) []uint32 {
	if len(ids) == 0 || int(ids[len(ids)-1]) < n {
		// Capped: an append by a caller must not write into the index.
		return ids[:len(ids):len(ids)]
	}
	i := sort.Search(len(ids), func(k int) bool { return int(ids[k]) >= n })
	return ids[:i:i]
}

// postings returns the ids of value in ni below n; one is scratch for a
// single id. Called with x.mu held.
func (ix *StreamIndex) postings(ni *nameIndex, value string, one *[1]uint32) []uint32 {
	v, ok := ni.vals[value]
	if !ok {
		return nil
	}
	return ix.entry(ni, v, one)
}

// entry returns the ids of a vals entry of ni (see postings).
func (ix *StreamIndex) entry(ni *nameIndex, v uint32, one *[1]uint32) []uint32 {
	switch {
	case v&many == 0:
		if int(v) >= len(ix.defs) {
			return nil
		}
		one[0] = v
		return one[:]
	}
	// The list's elements below its length at this moment are never
	// written again: appends go past them, or to a new array.
	return below(ni.lists[v&^many], len(ix.defs))
}

// Postings returns, ascending, the ids of the streams with label name =
// value (none for an empty value: a stream has no label with an empty
// value). The result must not be modified.
func (ix *StreamIndex) Postings(name, value string) []uint32 {
	ix.x.mu.RLock()
	defer ix.x.mu.RUnlock()
	ni := ix.x.names[name]
	if ni == nil {
		return nil
	}
	var one [1]uint32
	ids := ix.postings(ni, value, &one)
	if len(ids) == 1 && &ids[0] == &one[0] {
		return []uint32{one[0]}
	}
	return ids
}

// Values calls fn with each value of label name and, ascending, the ids
// of the streams that have it, in no particular order, until fn returns
// false. ids is valid during the call only. fn must not call ix (the
// index is read-locked meanwhile).
func (ix *StreamIndex) Values(name string, fn func(value string, ids []uint32) bool) {
	ix.x.mu.RLock()
	defer ix.x.mu.RUnlock()
	ni := ix.x.names[name]
	if ni == nil || int(ni.first) >= len(ix.defs) {
		return
	}
	var one [1]uint32
	for v, e := range ni.vals {
		if ids := ix.entry(ni, e, &one); len(ids) > 0 && !fn(v, ids) {
			return
		}
	}
}

// Names returns the label names the streams have, sorted.
func (ix *StreamIndex) Names() []string {
	ix.x.mu.RLock()
	defer ix.x.mu.RUnlock()
	var out []string
	for name, ni := range ix.x.names {
		if int(ni.first) < len(ix.defs) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
