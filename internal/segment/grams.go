package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// The skip index of format version 3: an exact postings index. For every
// distinct ASCII-lowered 4-gram of the segment's entries (never spanning
// two entries), the set of blocks holding it. It replaced the per-block
// bloom filters of version 2 (skip.go) after measuring both on 1M
// generated log lines (8 segments of ~32 blocks of 1 MiB): the blooms
// took 6.4% of the stored size at ~1.25-1.6 bits per distinct gram and
// had a false-positive rate of ~46% per gram, so for the absent needle
// "status=999", which an exact per-block gram set drops in all 251
// blocks, they let 63 blocks through, each costing ~1 ms of zstd
// decoding. The same data has only ~150 K distinct grams per segment
// (~50 K per block, most shared by most blocks), so exact postings cost
// about as much space as the blooms (see doc.go for the measured share)
// and never let a block through that lacks one of the needle's grams.
//
// Layout and encoding are documented in doc.go ("Skip index, version 3").

const (
	// gramGroup is how many consecutive grams (in ascending order) share
	// one group-table entry: a lookup binary-searches the table, then
	// decodes at most this many grams.
	gramGroup = 32

	// gramTableEntry is the size of a group-table entry: u32 first gram,
	// u32 offset of the group in the postings area, u32 CRC-32C of the
	// group's postings bytes. The per-group CRC lets Open checksum only
	// the section's head and table (~60 KiB of a ~700 KiB index on 32
	// MiB of logs) and a lookup verify just the groups it decodes: a
	// search reads a few groups, and the whole-section CRC at Open was
	// ~12% of the CPU of a search the index answers alone.
	gramTableEntry = 12

	// Posting codes, the low 3 bits of each gram's key varint
	// (delta<<3 | code).
	postAll    = 0 // every block; nothing follows
	postBitmap = 1 // ceil(B/8) bytes, bit b of byte b/8 for block b
	postNot    = 2 // every block but a list: uvarint count-1, then ids
	postList   = 3 // a list: uvarint count-1, then ids
	postList1  = 4 // a list of 1..4 ids (code-3 of them), no count
	postCodes  = 3 // bits of the code

	// gramCacheBits sizes the writer's direct-mapped cache of recently
	// seen grams: 2^17 slots of 2 bytes (256 KiB, within a core's L2).
	// Measured on generated logs, 1 MiB blocks of ~85 K distinct grams
	// record ~152 K candidates with 2^16 slots, ~122 K with 2^17 and
	// ~104 K with 2^18 (which no longer fits L2 beside the rest).
	gramCacheBits = 17

	// partBits is how many top bits of a gram's hash (and so of its
	// table slot) partition the candidates before they update the table.
	// A partitioned candidate keeps the other 24 bits and, in these 8,
	// its block's index in the batch: a batch has at most 2^partBits
	// blocks.
	partBits = 8

	// gramBatch is how many candidates (4 bytes each, 8 more while
	// flushing) the writer collects before setting their bits in its
	// table: a few blocks of log text.
	gramBatch = 1 << 20

	// maxGramEntries bounds the writer's table of (gram, 64 blocks)
	// entries for one segment: once it holds this many, later blocks are
	// left unindexed ("maybe" for every needle). With the candidates of
	// a batch and of one block added, the table holds at most 5 Mi
	// entries of 16 bytes at a load above 3/8: at most 128 MiB (plus the
	// sort's copy of the entries at Commit), for adversarial input. 32
	// MiB of generated logs have ~150 K entries (4 MiB of table).
	maxGramEntries = 1 << 21

	// maxBlockCands bounds one block's candidates (see gramCandLimit),
	// whatever its size: a block of one huge entry with more distinct
	// grams than this is left unindexed.
	maxBlockCands = 1 << 21
)

// gramCandLimit is the most grams a block of raw bytes may record as
// candidates (its distinct grams, and repeats the writer's cache lets
// through) and still be indexed: 4096 plus one per 2 raw bytes, and at
// most maxBlockCands. Log text records about one per 7 bytes in 1 MiB
// blocks and one per 3 in 16 KiB blocks; random bytes record one per
// byte, and their exact index would be several times the block's stored
// size while pruning what a scan of incompressible data could not find
// anyway. Unindexed blocks answer "maybe".
func gramCandLimit(raw int) int { return min(1<<12+raw/2, maxBlockCands) }

// valueCandLimit is gramCandLimit for a block's metadata values (version
// 5's values' index): trace and span ids are random hex, which records
// about a candidate per byte, but whose grams are at most 16^4 = 65,536,
// so their index stays small however many ids a block holds, and it is
// what lets a trace id's blocks be found. So a block's values stay
// indexed up to one candidate per byte; a block beyond it (more than
// maxBlockCands) makes the writer give the values' index up (see
// maxValueEntries), so that no posting lists unindexed blocks.
func valueCandLimit(raw int) int { return min(1<<12+raw, maxBlockCands) }

// The values' index of version 5 has a budget per segment (R11c-1):
// values of high cardinality that are not hex (base62 request ids,
// tokens) have ~1.7 M lowered 4-grams and ~19 distinct ones an id, so
// their exact index costs more than the values themselves (+71% of a
// segment at ingest size, +90% compacted, and a table of hundreds of MB
// at Commit). The writer therefore gives the values' index up, and writes
// it with every block unindexed (Reader.MetaIndexed false: no pruning, as
// in version 4), once its table holds more than maxValueEntries entries
// (memory), or once it is larger than valueIndexBudget (size: estimated
// at valueEntryBytes a table entry while writing, the encoded size at
// Commit). Hex ids stay indexed: they have only 65,536 grams, so their
// index grows with the segment's chunks of 64 blocks, not its entries.
const (
	// maxValueEntries bounds the values' table: 1<<20 entries need a
	// table of 2^21 slots of 16 bytes (32 MiB; one more batch may grow
	// it once) and Commit's sort buffer (16 MiB), against 2^21 entries
	// (64-128 MiB and 32 MiB) at maxGramEntries. Hex ids fill at most
	// 65,536 entries per 64 blocks: up to 1,024 blocks stay indexed.
	maxValueEntries = 1 << 20

	// valueEntryBytes estimates the encoded bytes of a table entry
	// while writing; measured 4 (unique base62 ids, sparse postings) to
	// 6-8 (hex ids, dense): the estimate stays at or under the real size.
	valueEntryBytes = 4

	// valueIndexShare: the values' index may be at most 1/valueIndexShare
	// of the bytes before the skip section (blocks and block index),
	// plus valueIndexSlack. Measured (docs/BENCHMARKS.md): hex OTel
	// trace and span ids in 1 MiB blocks need ~3% (R11c's data) to ~11%
	// (fix10's OTel data, compacted) of the stored bytes; unique base62
	// ids 70-90%. 1/5 keeps every hex case with room and bounds the worst
	// case to +20% of a large segment. The slack is for small segments:
	// a block's hex grams (up to 65,536, 100-300 KB of postings) are a
	// fixed cost a small segment cannot amortize (6,000 OTel entries in
	// 32 KiB blocks: a 300 KB index for 264 KB of blocks).
	valueIndexShare = 5
	valueIndexSlack = 1 << 20
)

// valueIndexBudget is the most bytes the values' index of a segment whose
// blocks and block index take stored bytes may take.
func valueIndexBudget(stored int64) int64 { return stored/valueIndexShare + valueIndexSlack }

// The writer works on a gram's hash h = g * gramMul mod 2^32 rather
// than on the gram g: multiplying by an odd constant is a bijection of
// uint32 (g = h * gramMulInv), so h identifies the gram, and its top bits
// are well mixed: they pick the cache slot (the remaining bits are the
// slot's tag) and the table slot, with no further hashing.
const gramMul = 0x9E3779B1

// gramMulInv is the inverse of gramMul modulo 2^32 (Newton's iteration:
// each step doubles the correct low bits).
var gramMulInv = func() uint32 {
	x := uint32(gramMul) // correct to 3 bits, as for any odd number
	for range 5 {
		x *= 2 - gramMul*x
	}
	return x
}()

// gramEntry is one entry of the writer's table: key is the gram's hash
// in the low 32 bits and the chunk of 64 blocks above; mask has bit b%64
// set for each block b of the chunk that holds the gram.
type gramEntry struct {
	key, mask uint64
}

// emptyKey marks a free table slot; chunks are below 2^26 (block counts
// are 32-bit), so no key has all its bits set. A key's table slot is the
// top bits of its hash alone (the chunks of a gram share a home slot and
// probe onwards: a segment of at most 64 blocks has one chunk).
const emptyKey = ^uint64(0)

// gramBuilder collects the distinct grams of each block of a segment and
// encodes the version 3 skip index at Commit.
//
// Per block, one pass over the bytes rolls the lowered 4-gram, hashes it
// and checks a direct-mapped cache (slot and 15-bit tag from the hash,
// reset per block): a hit means the gram was already recorded for this
// block; a miss records it as a candidate and takes the slot. Text
// repeats most of its grams, so the candidates are a small multiple of
// the distinct grams (~1.45x on generated logs), and the per-byte cost
// is one multiply and one load from a table in L2, without a branch.
// Each candidate then sets the block's bit in an open-addressing table
// gram -> block mask (a repeated candidate sets it again, harmlessly);
// candidates are collected over several blocks and partitioned by table
// region first (flush). Commit sorts the table's entries by gram and
// encodes their postings.
//
// Memory, for one segment of logs (32 blocks of 1 MiB): the cache (256
// KiB), the pending candidates (~4-8 MiB) and their partitioned copy
// (~4.5 MiB), the table (4 MiB) and Commit's sort buffer (2.4 MiB), all
// reused by the next Writer (gramSpare). Bounds for any input: a block
// records at most maxBlockCands candidates, a batch about gramBatch, and
// the table stops taking blocks at maxGramEntries (see there).
type gramBuilder struct {
	cache     *[1 << gramCacheBits]uint16
	pend      []uint32         // candidates' hashes, blocks not yet in the table
	pendEnd   []pendBlock      // where each pending block's candidates end
	part      []uint32         // pend partitioned by table region
	seen      *[1 << 14]uint64 // flush: bitmap counting distinct keys
	table     []gramEntry      // open addressing, len a power of two
	entries   int              // used slots
	blocks    int              // blocks added
	unindexed []uint32         // blocks left unindexed, ascending
	spare     []gramEntry      // a table from an earlier segment, to reuse
	sortBuf   []gramEntry      // encode's radix scratch
	dropped   bool             // dropIndex was called: every block unindexed
	escapes   bool             // version 7's lines: add each block's escape grams
}

// gramSpare keeps the memory of the last finished gramBuilder (~20 MiB
// for a segment of logs) for the next Writer: a store writes one segment
// after another, and fresh buffers for each (allocated, zeroed and
// faulted in) cost CPU and raised ingest's peak RSS. It is not a
// sync.Pool, which drops its contents at every garbage collection: ingest
// collects about as often as it writes a segment, so the buffers were
// mostly lost. One builder is kept at most (a store flushes one segment
// at a time); it stays allocated once the process writes no more.
var gramSpare struct {
	sync.Mutex
	b *gramBuilder
}

// release hands the builder's memory to gramSpare; the builder is empty
// afterwards.
func (s *gramBuilder) release() {
	if s.cache != nil {
		gramSpare.Lock()
		if gramSpare.b == nil {
			gramSpare.b = &gramBuilder{cache: s.cache, seen: s.seen, pend: s.pend[:0], pendEnd: s.pendEnd[:0], part: s.part[:0], spare: s.table, sortBuf: s.sortBuf}
		}
		gramSpare.Unlock()
	}
	*s = gramBuilder{}
}

// pendBlock marks the end of a block's candidates in gramBuilder.pend.
type pendBlock struct {
	end   int
	block uint32
}

// add records the distinct grams of the next block (data cut by lens:
// its entries, or in the values' index of version 5 its metadata
// values), unless it records more than limit candidates (gramCandLimit,
// valueCandLimit): then the block is left unindexed.
func (s *gramBuilder) add(data []byte, lens []uint32, limit int) {
	block := uint32(s.blocks)
	s.blocks++
	if s.cache == nil {
		gramSpare.Lock()
		p := gramSpare.b
		gramSpare.b = nil
		gramSpare.Unlock()
		if p != nil {
			*s = gramBuilder{cache: p.cache, seen: p.seen, pend: p.pend, pendEnd: p.pendEnd, part: p.part, spare: p.spare, sortBuf: p.sortBuf, blocks: s.blocks, escapes: s.escapes}
		} else {
			s.cache = new([1 << gramCacheBits]uint16)
		}
	}
	// A slot holds the low bits of the last hash that took it, with the
	// top bit set; 0 is an empty slot.
	cache := s.cache
	clear(cache[:])
	start := len(s.pend)
	limit += start
	cand := s.pend
	off := 0
	for _, l := range lens {
		line := data[off : off+int(l)]
		off += int(l)
		if len(line) < SkipGram {
			continue
		}
		g := uint32(lowerTable[line[0]])<<16 | uint32(lowerTable[line[1]])<<8 | uint32(lowerTable[line[2]])
		line = line[3:]
		for len(line) > 0 && len(cand) <= limit {
			chunk := line[:min(len(line), 1<<16)]
			line = line[len(chunk):]
			n := len(cand)
			cand = slices.Grow(cand, len(chunk))[:n+len(chunk)]
			var k int
			k, g = scanGrams(cache, cand[n:], g, chunk)
			cand = cand[:n+k]
		}
		if len(cand) > limit {
			break
		}
	}
	if s.escapes && len(cand) <= limit {
		cand = appendEscapeGrams(cand, data, lens)
	}
	if len(cand) > limit || s.entries >= maxGramEntries {
		s.pend = cand[:start]
		s.unindexed = append(s.unindexed, block)
		return
	}
	s.pend = cand
	s.pendEnd = append(s.pendEnd, pendBlock{len(cand), block})
	if len(cand) >= gramBatch || len(s.pendEnd) == 1<<partBits {
		s.flush()
	}
}

// EscapeGram is the gram that stands, in the lines' index of format
// version 7, for "an entry of the block holds an escape that spells the
// ASCII character c" (escapedASCII): 'E', 'S', 'C' and c, big-endian.
// The index lowers ASCII, so no entry's own gram holds an upper-case
// letter: an escape gram is never one of the text's.
func EscapeGram(c byte) uint32 { return 'E'<<24 | 'S'<<16 | 'C'<<8 | uint32(c) }

// appendEscapeGrams appends to cand the hash of the escape gram of each
// ASCII character that an escape in one of the entries (data cut by
// lens) spells, once each.
func appendEscapeGrams(cand []uint32, data []byte, lens []uint32) []uint32 {
	var set [2]uint64
	// Backslashes are rare in most logs: entries before the next one
	// cost a comparison each.
	next := bytes.IndexByte(data, '\\')
	if next < 0 {
		return cand
	}
	off := 0
	for _, l := range lens {
		end := off + int(l)
		if next < end {
			set = escapedASCII(set, data[off:end])
			i := bytes.IndexByte(data[end:], '\\')
			if i < 0 {
				break
			}
			next = end + i
		}
		off = end
	}
	for c := range 128 {
		if set[c/64]&(1<<(c%64)) != 0 {
			cand = append(cand, EscapeGram(byte(c))*gramMul)
		}
	}
	return cand
}

// escapedASCII adds to set (bit c for character c) the ASCII characters
// that escapes in line spell: a backslash, then 'u' or 'U' and 4 or 8
// hex digits, 'x' or 'X' and 2, or 3 octal digits, whose value is below
// 0x80. Letters and hex digits are read in either case, and a backslash
// counts whatever precedes it (`\\u0035`, an escaped backslash before
// "u0035", counts as an escape of '5'): the set may hold more than the
// parsers decode (JSON's \uHHHH; logfmt's strconv.Unquote \uHHHH,
// \UHHHHHHHH, \xHH and \ooo), never less.
func escapedASCII(set [2]uint64, line []byte) [2]uint64 {
	for {
		i := bytes.IndexByte(line, '\\')
		if i < 0 {
			return set
		}
		line = line[i+1:]
		if len(line) == 0 {
			return set
		}
		switch line[0] {
		case 'u', 'U':
			if v, ok := hexValue(line[1:], 4); ok && v < 0x80 {
				set[v/64] |= 1 << (v % 64)
			}
			if v, ok := hexValue(line[1:], 8); ok && v < 0x80 {
				set[v/64] |= 1 << (v % 64)
			}
		case 'x', 'X':
			if v, ok := hexValue(line[1:], 2); ok && v < 0x80 {
				set[v/64] |= 1 << (v % 64)
			}
		case '0', '1':
			if len(line) >= 3 && isOctal(line[1]) && isOctal(line[2]) {
				v := uint32(line[0]-'0')<<6 | uint32(line[1]-'0')<<3 | uint32(line[2]-'0')
				set[v/64] |= 1 << (v % 64)
			}
		}
	}
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }

// hexValue reads n hex digits (either case) at the start of b.
func hexValue(b []byte, n int) (uint32, bool) {
	if len(b) < n {
		return 0, false
	}
	var v uint32
	for _, c := range b[:n] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

// dropIndex gives the index up (the values' budget): every block added
// so far, and every later one (addUnindexed), is unindexed, and the
// builder's memory is dropped (not kept in gramSpare: it may be large).
// encode then writes no gram.
func (s *gramBuilder) dropIndex() {
	n := s.blocks
	*s = gramBuilder{blocks: n, dropped: true, unindexed: make([]uint32, n)}
	for i := range s.unindexed {
		s.unindexed[i] = uint32(i)
	}
}

// addUnindexed adds a block left unindexed without looking at its data.
func (s *gramBuilder) addUnindexed() {
	s.unindexed = append(s.unindexed, uint32(s.blocks))
	s.blocks++
}

// scanGramsGo rolls gram g through chunk and records the hash of each
// gram that misses the cache in cand (len(cand) >= len(chunk)), returning
// how many it recorded and the last gram. Every hash is stored at
// cand[n]; n advances past it only on a miss (a conditional move, not a
// branch). It is scanGrams where that has no assembly version, and the
// assembly's oracle in tests. It is a function of its own so that the
// loop's few variables stay in registers (inlined into add, they spilled
// to the stack).
//
//go:noinline
func scanGramsGo(cache *[1 << gramCacheBits]uint16, cand []uint32, g uint32, chunk []byte) (int, uint32) {
	lower := &lowerTable
	n := 0
	for _, c := range chunk {
		g = g<<8 | uint32(lower[c])
		h := g * gramMul
		slot, tag := h>>(32-gramCacheBits), uint16(h)|1<<15
		old := cache[slot]
		cache[slot] = tag
		cand[n] = h
		if old != tag {
			n++
		}
	}
	return n, g
}

// flush sets the pending blocks' bits in the table.
//
// The table is several MiB (beyond L2), so random probes would cost a
// cache miss each. Instead the pending candidates of several blocks are
// partitioned by the top bits of their slot and then visit one small
// region of the table after another: one pass over the table per batch.
func (s *gramBuilder) flush() {
	if len(s.pend) == 0 {
		// Blocks without a gram (short entries; in the values' index,
		// blocks without metadata) set nothing, but their marks must go:
		// a batch holds at most 1<<partBits of them.
		s.pendEnd = s.pendEnd[:0]
		return
	}
	// Count the partitions; for a segment's first batch, also estimate
	// its distinct keys by linear counting on a bitmap of 2^20 bits.
	var cnt [1 << partBits]int32
	distinct := len(s.pend)
	first := s.entries == 0
	if first && s.seen == nil {
		s.seen = new([1 << 14]uint64)
	}
	if first {
		clear(s.seen[:])
	}
	if first {
		seen := s.seen
		for _, h := range s.pend {
			cnt[h>>(32-partBits)]++
			seen[h>>18] |= 1 << (h >> 12 & 63)
		}
	} else {
		for _, h := range s.pend {
			cnt[h>>(32-partBits)]++
		}
	}
	if first {
		set := 0
		for _, w := range s.seen {
			set += bits.OnesCount64(w)
		}
		if m := float64(1 << 20); float64(set) < m {
			distinct = min(distinct, int(-m*math.Log(1-float64(set)/m)*1.1)+64)
		}
	}
	// Scatter: partition d holds the candidates whose hash has top byte
	// d, each stored as the hash's low 24 bits and, above them, the
	// index of its block in the batch (a batch has at most 256 blocks).
	var end [1 << partBits]int32
	sum := int32(0)
	for i, n := range cnt {
		cnt[i] = sum
		sum += n
		end[i] = sum
	}
	part := slices.Grow(s.part[:0], len(s.pend))[:len(s.pend)]
	start := 0
	var chunkOf, bitOf [1 << partBits]uint64
	for bi, pb := range s.pendEnd {
		chunkOf[bi] = uint64(pb.block/64) << 32
		bitOf[bi] = 1 << (pb.block % 64)
		for _, h := range s.pend[start:pb.end] {
			d := h >> (32 - partBits)
			part[cnt[d]] = h&(1<<(32-partBits)-1) | uint32(bi)<<(32-partBits)
			cnt[d]++
		}
		start = pb.end
	}
	s.part = part[:0]
	s.pend, s.pendEnd = s.pend[:0], s.pendEnd[:0]

	// The keys arrive sorted by region, so each region of the table
	// receives its final share of the batch's keys at once: the table
	// must be large enough for the whole batch before a region is filled
	// (growing when the table as a whole looks full would be too late:
	// the regions done so far would be overfull, with probe runs across
	// them). The first batch of a segment sizes the table by the
	// estimate; later batches bring few new grams, so the table grows
	// when the new keys so far, extrapolated to the whole batch, would
	// fill it beyond 3/4.
	est := s.entries
	if first {
		est = distinct
	}
	if need := max(1<<16, est*4/3+1); len(s.table) < need {
		s.grow(1 << bits.Len(uint(need-1)))
	}
	before := s.entries
	lo := int32(0)
	for d := range end {
		if d%4 == 0 && lo > 0 {
			projected := before + (s.entries-before)*len(part)/int(lo)
			if projected > len(s.table)/4*3 {
				s.grow(1 << bits.Len(uint(projected*4/3)))
			}
		}
		s.insert(part[lo:end[d]], uint32(d)<<(32-partBits), &chunkOf, &bitOf)
		lo = end[d]
	}
}

// insert sets the blocks' bits of one partition's candidates in the
// table: top is the hashes' top byte; each value holds a hash's low 24
// bits and its block's index in the batch (chunkOf and bitOf give the
// block's chunk, as a key's upper half, and bit).
func (s *gramBuilder) insert(vals []uint32, top uint32, chunkOf, bitOf *[1 << partBits]uint64) {
	t := s.table
	tm := uint64(len(t) - 1)
	shift := 32 - bits.Len64(tm)
	for _, v := range vals {
		bi := v >> (32 - partBits)
		h := top | v&(1<<(32-partBits)-1)
		key := uint64(h) | chunkOf[bi]
		bit := bitOf[bi]
		i := uint64(h) >> shift
		for {
			e := &t[i]
			if e.key == key {
				e.mask |= bit
				break
			}
			if e.key == emptyKey {
				e.key, e.mask = key, bit
				s.entries++
				if s.entries > len(t)/8*7 {
					// Never fuller than 7/8, whatever the projection.
					s.grow(2 * len(t))
					t = s.table
					tm = uint64(len(t) - 1)
					shift = 32 - bits.Len64(tm)
				}
				break
			}
			i = (i + 1) & tm
		}
	}
}

// grow rehashes the table into n slots (a power of two).
func (s *gramBuilder) grow(n int) {
	old := s.table
	var t []gramEntry
	if cap(s.spare) >= n && cap(s.spare) <= 4*n {
		t, s.spare = s.spare[:n], nil
	} else {
		t = make([]gramEntry, n)
	}
	for i := range t {
		t[i].key = emptyKey
	}
	tm := uint64(n - 1)
	shift := 32 - bits.Len64(tm)
	for _, e := range old {
		if e.key == emptyKey {
			continue
		}
		i := uint64(uint32(e.key)) >> shift
		for t[i].key != emptyKey {
			i = (i + 1) & tm
		}
		t[i] = e
	}
	s.table = t
}

// radixSortEntries sorts a by gram, then chunk (the key with its halves
// swapped; LSD radix, 11-bit digits, skipping digits that are the same
// throughout), using tmp as scratch.
func radixSortEntries(a, tmp []gramEntry, gramOnly bool) {
	src, dst := a, tmp[:len(a)]
	var c [2048]int
	shift := uint(0)
	if gramOnly {
		shift = 32 // the chunks, in the low half, are all 0
	}
	for ; shift < 64 && len(a) > 0; shift += 11 {
		clear(c[:])
		for _, e := range src {
			c[bits.RotateLeft64(e.key, 32)>>shift&2047]++
		}
		if c[bits.RotateLeft64(src[0].key, 32)>>shift&2047] == len(a) {
			continue
		}
		sum := 0
		for i, n := range c {
			c[i] = sum
			sum += n
		}
		for _, e := range src {
			d := bits.RotateLeft64(e.key, 32) >> shift & 2047
			dst[c[d]] = e
			c[d]++
		}
		src, dst = dst, src
	}
	if len(a) > 0 && &src[0] != &a[0] {
		copy(a, src)
	}
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int {
	return (bits.Len64(v|1) + 6) / 7
}

// listLen is the encoded length of ascending ids as a posting list after
// its count: the first id, then each gap minus one. It stops counting
// once past stop.
func listLen(ids []uint32, stop int) int {
	n, prev := 0, uint32(0)
	for i, b := range ids {
		if i == 0 {
			n += uvarintLen(uint64(b))
		} else {
			n += uvarintLen(uint64(b - prev - 1))
		}
		prev = b
		if n > stop {
			break
		}
	}
	return n
}

func appendList(dst []byte, ids []uint32) []byte {
	prev := uint32(0)
	for i, b := range ids {
		if i == 0 {
			dst = binary.AppendUvarint(dst, uint64(b))
		} else {
			dst = binary.AppendUvarint(dst, uint64(b-prev-1))
		}
		prev = b
	}
	return dst
}

// encode returns the version 3 skip index of the blocks added, and the
// length of its head (counts and group table), which the footer's skipCRC
// covers; the postings after it are covered by the groups' CRCs.
func (s *gramBuilder) encode() (skip []byte, head int) {
	s.flush()
	nb := s.blocks
	bitmapLen := (nb + 7) / 8
	// The used entries, packed to the front, then sorted by (gram, chunk).
	es := s.table
	k := 0
	for _, e := range es {
		if e.key != emptyKey {
			// From the gram's hash back to the gram.
			e.key = e.key&^0xFFFFFFFF | uint64(uint32(e.key)*gramMulInv)
			es[k] = e
			k++
		}
	}
	es = es[:k]
	if cap(s.sortBuf) < k {
		s.sortBuf = make([]gramEntry, k)
	}
	// With at most 64 blocks every chunk is 0: sort by the gram alone.
	radixSortEntries(es, s.sortBuf[:k], nb <= 64)

	var table, area []byte
	var ids, not []uint32
	count := 0
	var prev uint32
	var unMask uint64 // the unindexed blocks, when nb <= 64
	for _, b := range s.unindexed {
		unMask |= 1 << (b % 64)
	}
	for i := 0; i < len(es); {
		g := uint32(es[i].key)
		var delta uint64
		if count%gramGroup == 0 {
			table = binary.LittleEndian.AppendUint32(table, g)
			table = binary.LittleEndian.AppendUint32(table, uint32(len(area)))
			table = binary.LittleEndian.AppendUint32(table, 0) // the CRC, below
		} else {
			delta = uint64(g - prev)
		}
		prev = g
		count++
		if nb <= 64 {
			// One mask per gram, and every id, gap and count fits in a
			// one-byte uvarint: the sizes are known without listing.
			m := es[i].mask | unMask
			i++
			area = appendMaskPosting(area, delta, m, nb)
			continue
		}
		ids = ids[:0]
		for ; i < len(es) && uint32(es[i].key) == g; i++ {
			base := uint32(es[i].key>>32) * 64
			for m := es[i].mask; m != 0; m &= m - 1 {
				ids = append(ids, base+uint32(bits.TrailingZeros64(m)))
			}
		}
		if len(s.unindexed) > 0 {
			// Unindexed blocks are in every posting.
			ids = mergeIDs(ids, s.unindexed, &not)
		}
		// Pick the shortest encoding.
		n := len(ids)
		code, size := postBitmap, bitmapLen
		if n == nb {
			code, size = postAll, 0
		}
		if size > 0 {
			l := listLen(ids, size)
			if n > 4 {
				l += uvarintLen(uint64(n - 1))
			}
			if l < size {
				code, size = postList, l
				if n <= 4 {
					code = postList1 + n - 1
				}
			}
		}
		if size > 0 && nb-n < size {
			not = complement(not[:0], ids, nb)
			if l := uvarintLen(uint64(len(not)-1)) + listLen(not, size); l < size {
				code, size = postNot, l
			}
		}
		area = binary.AppendUvarint(area, delta<<postCodes|uint64(code))
		switch {
		case code == postBitmap:
			start := len(area)
			area = append(area, make([]byte, bitmapLen)...)
			for _, b := range ids {
				area[start+int(b/8)] |= 1 << (b % 8)
			}
		case code == postNot:
			area = binary.AppendUvarint(area, uint64(len(not)-1))
			area = appendList(area, not)
		case code == postList:
			area = binary.AppendUvarint(area, uint64(n-1))
			area = appendList(area, ids)
		case code >= postList1:
			area = appendList(area, ids)
		}
	}
	// Each group's CRC, now that its end (the next group's offset) is known.
	for k := 0; k < len(table); k += gramTableEntry {
		end := len(area)
		if k+gramTableEntry < len(table) {
			end = int(binary.LittleEndian.Uint32(table[k+gramTableEntry+4:]))
		}
		off := binary.LittleEndian.Uint32(table[k+4:])
		binary.LittleEndian.PutUint32(table[k+8:], crc32.Checksum(area[off:end], castagnoli))
	}
	out := binary.AppendUvarint(nil, uint64(nb))
	out = binary.AppendUvarint(out, uint64(len(s.unindexed)))
	out = appendList(out, s.unindexed)
	out = binary.AppendUvarint(out, uint64(count))
	out = append(out, table...)
	head = len(out)
	return append(out, area...), head
}

// appendMaskPosting appends the key and posting of a gram whose blocks
// are the set bits of m, in a segment of nb <= 64 blocks. It picks the
// same encoding, and writes the same bytes, as encode's general path.
func appendMaskPosting(dst []byte, delta, m uint64, nb int) []byte {
	n := bits.OnesCount64(m)
	code, size := postBitmap, (nb+7)/8
	if n == nb {
		code, size = postAll, 0
	}
	if size > 0 {
		l := n
		if n > 4 {
			l++
		}
		if l < size {
			code, size = postList, l
			if n <= 4 {
				code = postList1 + n - 1
			}
		}
	}
	if size > 0 && nb-n < size && 1+nb-n < size {
		code = postNot
	}
	dst = binary.AppendUvarint(dst, delta<<postCodes|uint64(code))
	switch {
	case code == postBitmap:
		for k := 0; k < (nb+7)/8; k++ {
			dst = append(dst, byte(m>>(8*k)))
		}
	case code == postNot:
		full := uint64(1)<<nb - 1
		if nb == 64 {
			full = ^uint64(0)
		}
		dst = append(dst, byte(nb-n-1))
		dst = appendMaskList(dst, ^m&full)
	case code == postList:
		dst = append(dst, byte(n-1))
		dst = appendMaskList(dst, m)
	case code >= postList1:
		dst = appendMaskList(dst, m)
	}
	return dst
}

// appendMaskList appends the set bits of m as a list of ids (first id,
// then gap-1), each a one-byte uvarint since ids are below 64.
func appendMaskList(dst []byte, m uint64) []byte {
	prev := -1
	for ; m != 0; m &= m - 1 {
		b := bits.TrailingZeros64(m)
		dst = append(dst, byte(b-prev-1))
		prev = b
	}
	return dst
}

// mergeIDs returns the union of ascending ids a and b, using *scratch.
func mergeIDs(a, b []uint32, scratch *[]uint32) []uint32 {
	out := (*scratch)[:0]
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	*scratch = a[:0]
	return out
}

// complement appends to dst the ids in [0, n) absent from ascending ids.
func complement(dst, ids []uint32, n int) []uint32 {
	k := 0
	for b := range uint32(n) {
		if k < len(ids) && ids[k] == b {
			k++
			continue
		}
		dst = append(dst, b)
	}
	return dst
}

// gramIndex is a parsed version 3 skip index: the group table and the
// postings area point into the mapping and are decoded on lookup.
type gramIndex struct {
	blocks    int
	unindexed []uint64 // bitmap of the unindexed blocks
	grams     int      // distinct grams
	table     []byte   // groups x (u32 first gram, u32 offset, u32 CRC)
	area      []byte   // postings

	// Groups whose CRC has been checked, one bit each: ok once it
	// matched, bad once it did not (then the group is never decoded).
	// Lookups from several goroutines may check a group twice; the
	// answer is the same.
	ok, bad []atomic.Uint32
	// damage is the first damaged or malformed group met by a lookup.
	damage atomic.Pointer[groupError]

	mu    sync.Mutex
	cache map[string][]uint64 // lowered literal -> block bitmap
}

// allUnindexed reports whether the index has blocks and leaves every one
// unindexed: a values' index its writer gave up (dropIndex), which can
// rule nothing out.
func (x *gramIndex) allUnindexed() bool {
	n := 0
	for _, w := range x.unindexed {
		n += bits.OnesCount64(w)
	}
	return x.blocks > 0 && n == x.blocks
}

// groupError is a damaged (checksum mismatch) or malformed group.
type groupError struct {
	group  int
	reason string
}

func (e *groupError) Error() string {
	return fmt.Sprintf("skip index group %d: %s", e.group, e.reason)
}

// maxCachedLiterals bounds the per-Reader cache of literal bitmaps; the
// cache is emptied when full. Per-block lookups (MayContain) of more
// literals than this would rebuild every literal's bitmap for every
// block, so a search asks for all blocks at once (MayContainBlocks).
const maxCachedLiterals = 1024

var errGrams = errors.New("malformed postings")

// parseGrams parses a version 3 skip index over nb blocks. It checks the
// framing and the group table (ascending first grams and offsets inside
// the postings area) but not the postings, which lookups decode and
// check lazily and Verify checks whole.
func parseGrams(b []byte, nb int) (*gramIndex, error) {
	d := decoder{b: b}
	n := d.uvarint()
	if d.err == nil && n != uint64(nb) {
		return nil, errors.New("block count differs from the block index")
	}
	nu := d.uvarint()
	if d.err == nil && nu > uint64(nb) {
		return nil, errors.New("more unindexed blocks than blocks")
	}
	x := &gramIndex{blocks: nb, unindexed: make([]uint64, (nb+63)/64)}
	prev := uint64(0)
	for i := uint64(0); i < nu && d.err == nil; i++ {
		v := d.uvarint()
		if i > 0 {
			v += prev + 1
			if v <= prev {
				d.fail("unindexed block ids overflow")
			}
		}
		if d.err == nil && v >= uint64(nb) {
			d.fail("unindexed block id out of range")
		}
		if d.err != nil {
			break
		}
		x.unindexed[v/64] |= 1 << (v % 64)
		prev = v
	}
	g := d.uvarint()
	if d.err != nil {
		return nil, d.err
	}
	rest := d.b
	// Every gram takes at least one byte of the postings area.
	if g > uint64(len(rest)) {
		return nil, errors.New("gram count too large for the section")
	}
	groups := (int(g) + gramGroup - 1) / gramGroup
	if groups*gramTableEntry > len(rest) {
		return nil, errors.New("group table exceeds the section")
	}
	x.grams = int(g)
	x.table = rest[:groups*gramTableEntry]
	x.area = rest[groups*gramTableEntry:]
	x.ok = make([]atomic.Uint32, (groups+31)/32)
	x.bad = make([]atomic.Uint32, (groups+31)/32)
	if groups == 0 {
		if len(x.area) != 0 {
			return nil, errors.New("trailing bytes after an empty index")
		}
		return x, nil
	}
	for k := range groups {
		first, off := x.group(k)
		switch {
		case k == 0 && off != 0:
			return nil, errors.New("first group does not start the postings area")
		case k > 0 && first <= binary.LittleEndian.Uint32(x.table[(k-1)*gramTableEntry:]):
			return nil, errors.New("group table grams not ascending")
		case k > 0 && off <= binary.LittleEndian.Uint32(x.table[(k-1)*gramTableEntry+4:]):
			return nil, errors.New("group table offsets not ascending")
		case uint64(off) >= uint64(len(x.area)):
			return nil, errors.New("group offset outside the postings area")
		}
	}
	return x, nil
}

// group returns group k's first gram and offset.
func (x *gramIndex) group(k int) (first, off uint32) {
	e := x.table[k*gramTableEntry:]
	return binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
}

// verify checks group k's CRC the first time it is used, and returns a
// *groupError (also recorded as the index's damage) when it fails.
func (x *gramIndex) verify(k int) error {
	w, bit := k/32, uint32(1)<<(k%32)
	if x.ok[w].Load()&bit != 0 {
		return nil
	}
	if x.bad[w].Load()&bit != 0 {
		return &groupError{group: k, reason: "checksum mismatch"}
	}
	b, _ := x.groupBytes(k)
	want := binary.LittleEndian.Uint32(x.table[k*gramTableEntry+8:])
	if crc32.Checksum(b, castagnoli) != want {
		x.bad[w].Or(bit)
		err := &groupError{group: k, reason: "checksum mismatch"}
		x.damage.CompareAndSwap(nil, err)
		return err
	}
	x.ok[w].Or(bit)
	return nil
}

// groupBytes returns group k's bytes and gram count.
func (x *gramIndex) groupBytes(k int) ([]byte, int) {
	groups := len(x.table) / gramTableEntry
	_, off := x.group(k)
	end := len(x.area)
	if k+1 < groups {
		_, e := x.group(k + 1)
		end = int(e)
	}
	n := gramGroup
	if k == groups-1 {
		n = x.grams - k*gramGroup
	}
	return x.area[off:end], n
}

// posting is one decoded posting: its code and payload (after the key).
type posting struct {
	code int
	n    int    // ids in a list or complement
	data []byte // bitmap bytes or list ids
}

// groupIter decodes one group's grams in order, checking every field.
type groupIter struct {
	x     *gramIndex
	d     decoder
	left  int    // grams not yet decoded
	gram  uint32 // the current gram
	limit uint64 // grams must stay below this (the next group's first)
	p     posting
	first bool
}

func (x *gramIndex) iter(k int) groupIter {
	b, n := x.groupBytes(k)
	first, _ := x.group(k)
	limit := uint64(1) << 32
	if (k+1)*gramTableEntry < len(x.table) {
		next, _ := x.group(k + 1)
		limit = uint64(next)
	}
	return groupIter{x: x, d: decoder{b: b}, left: n, gram: first, limit: limit, first: true}
}

// next decodes the next gram and its posting; false at the end of the
// group or on an error (it.d.err), which includes bytes left over after
// the group's last gram.
func (it *groupIter) next() bool {
	if it.left == 0 || it.d.err != nil {
		if it.d.err == nil && len(it.d.b) != 0 {
			it.d.err = errGrams
		}
		return false
	}
	it.left--
	v := it.d.uvarint()
	delta, code := v>>postCodes, int(v&(1<<postCodes-1))
	if it.first {
		it.first = false
		if delta != 0 {
			it.d.fail("first gram of a group has a delta")
		}
	} else if delta == 0 || uint64(it.gram)+delta >= it.limit {
		it.d.fail("grams not ascending")
	}
	if it.d.err != nil {
		return false
	}
	it.gram += uint32(delta)
	nb := it.x.blocks
	it.p = posting{code: code}
	switch {
	case code == postAll:
	case code == postBitmap:
		l := (nb + 7) / 8
		if l > len(it.d.b) || (nb%8 != 0 && it.d.b[l-1]>>(nb%8) != 0) {
			it.d.fail("bad bitmap")
			return false
		}
		it.p.data, it.d.b = it.d.b[:l], it.d.b[l:]
	case code == postNot || code == postList || code >= postList1:
		var n uint64
		if code >= postList1 {
			n = uint64(code-postList1) + 1
		} else {
			n = it.d.uvarint() + 1
		}
		if it.d.err != nil || n > uint64(nb) || n == 0 {
			it.d.fail("bad list count")
			return false
		}
		start := it.d.b
		b := uint64(0)
		for i := range n {
			v := it.d.uvarint()
			if i > 0 {
				v += b + 1
				if v <= b {
					it.d.fail("bad list")
				}
			}
			if it.d.err != nil || v >= uint64(nb) {
				it.d.fail("bad list")
				return false
			}
			b = v
		}
		it.p.n, it.p.data = int(n), start[:len(start)-len(it.d.b)]
	default:
		it.d.fail("unknown posting code")
		return false
	}
	return true
}

// and intersects res (a bitmap over the blocks) with posting p.
func (p *posting) and(res []uint64) {
	switch {
	case p.code == postAll:
	case p.code == postBitmap:
		for w := range res {
			var v uint64
			for k := 0; k < 8 && w*8+k < len(p.data); k++ {
				v |= uint64(p.data[w*8+k]) << (8 * k)
			}
			res[w] &= v
		}
	case p.code == postNot:
		p.each(func(b uint64) { res[b/64] &^= 1 << (b % 64) })
	default:
		var keep [4]uint64
		mask := keep[:0]
		if len(res) > len(keep) {
			mask = make([]uint64, len(res))
		} else {
			mask = keep[:len(res)]
		}
		p.each(func(b uint64) { mask[b/64] |= 1 << (b % 64) })
		for w := range res {
			res[w] &= mask[w]
		}
	}
}

// each calls f with each id of a (checked) list or complement posting.
func (p *posting) each(f func(uint64)) {
	d := decoder{b: p.data}
	b := uint64(0)
	for i := range p.n {
		v := d.uvarint()
		if i > 0 {
			v += b + 1
		}
		b = v
		f(b)
	}
}

// find returns gram g's posting; ok is false when g is in no block. A
// malformed group is an error.
func (x *gramIndex) find(g uint32) (p posting, ok bool, err error) {
	groups := len(x.table) / gramTableEntry
	// The last group whose first gram is <= g.
	k := -1 + sortSearch(groups, func(k int) bool {
		first, _ := x.group(k)
		return first > g
	})
	if k < 0 {
		return posting{}, false, nil
	}
	if err := x.verify(k); err != nil {
		return posting{}, false, err
	}
	it := x.iter(k)
	for it.next() {
		if it.gram == g {
			return it.p, true, nil
		}
		if it.gram > g {
			return posting{}, false, nil
		}
	}
	if it.d.err != nil {
		// A forgery (the CRC matched): record it like damage.
		err := &groupError{group: k, reason: "malformed postings: " + it.d.err.Error()}
		x.damage.CompareAndSwap(nil, err)
		return posting{}, false, err
	}
	return posting{}, false, nil
}

// sortSearch is sort.Search without the import.
func sortSearch(n int, f func(int) bool) int {
	i, j := 0, n
	for i < j {
		h := int(uint(i+j) >> 1)
		if !f(h) {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

// blocksOf returns the bitmap of blocks that hold every lowered 4-gram of
// lowered (or are unindexed), or nil if the index is malformed (then
// every block is a maybe).
func (x *gramIndex) blocksOf(lowered []byte) []uint64 {
	res := make([]uint64, (x.blocks+63)/64)
	for i := range res {
		res[i] = ^uint64(0)
	}
	if r := x.blocks % 64; r != 0 {
		res[len(res)-1] = 1<<r - 1
	}
	g := uint32(lowered[0])<<16 | uint32(lowered[1])<<8 | uint32(lowered[2])
	for _, c := range lowered[3:] {
		g = g<<8 | uint32(c)
		p, ok, err := x.find(g)
		if err != nil {
			return nil
		}
		if !ok {
			for w := range res {
				res[w] &= x.unindexed[w]
			}
			break
		}
		p.and(res)
	}
	return res
}

// mayContain answers Reader.MayContain for a literal of at least SkipGram
// bytes, through the per-Reader cache of literal bitmaps.
func (x *gramIndex) mayContain(i int, lit []byte) bool {
	bm := x.literalBlocks(lit)
	return bm == nil || bm[i/64]&(1<<(i%64)) != 0
}

// literalBlocks is the bitmap of the blocks that may hold lit (at least
// SkipGram bytes), lowered as the index is, through the per-Reader
// cache (shared: the caller must not modify it); nil when every block
// may.
func (x *gramIndex) literalBlocks(lit []byte) []uint64 {
	var buf [64]byte
	key := buf[:0]
	if len(lit) > len(buf) {
		key = make([]byte, 0, len(lit))
	}
	for _, c := range lit {
		key = append(key, lowerTable[c])
	}
	return x.cachedBlocks(key)
}

// mayContainKey is mayContain for a key of grams as the index holds
// them: lowered, or an escape gram (EscapeGram), whose upper-case bytes
// keep it apart from every lowered key in the cache.
func (x *gramIndex) mayContainKey(i int, key []byte) bool {
	bm := x.cachedBlocks(key)
	return bm == nil || bm[i/64]&(1<<(i%64)) != 0
}

// cachedBlocks is blocksOf(key) through the per-Reader cache of literal
// bitmaps (shared: the caller must not modify the result).
func (x *gramIndex) cachedBlocks(key []byte) []uint64 {
	x.mu.Lock()
	bm, ok := x.cache[string(key)]
	x.mu.Unlock()
	if !ok {
		bm = x.blocksOf(key)
		x.mu.Lock()
		if x.cache == nil || len(x.cache) >= maxCachedLiterals {
			x.cache = make(map[string][]uint64)
		}
		x.cache[string(key)] = bm
		x.mu.Unlock()
	}
	return bm
}

// check verifies every group's CRC and decodes it, returning the first
// error (a *groupError).
func (x *gramIndex) check() error {
	for k := range len(x.table) / gramTableEntry {
		if err := x.verify(k); err != nil {
			return err
		}
		it := x.iter(k)
		for it.next() {
		}
		if it.d.err != nil {
			return &groupError{group: k, reason: "malformed postings: " + it.d.err.Error()}
		}
	}
	return nil
}
