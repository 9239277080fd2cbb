// Package search runs queries over a store snapshot: a literal substring
// (Query.Pattern, grep -F) or a compiled LogQL plan (Query.Plan, see
// package query), in either time order, with grep-style context entries,
// limits, counts and a histogram of hits over time.
//
// # Execution
//
// The executor works block by block. Blocks whose time range misses the
// query's are skipped from the block index alone, and so are blocks whose
// index lists no stream the plan's selector accepts (stream labels come
// from Query.Labels; entries of unselected streams never match). A kept
// block is decoded and the needle kernel runs over its whole Data buffer,
// not line by line: a hit is mapped to the entry that contains it through
// the block's offsets (a binary search from the current entry), a hit that
// runs past its entry's end is rejected (entries may contain '\n', so the
// buffer has no separators to stop it), and the scan resumes at the next
// entry's start, since an entry matches at most once.
//
// For a plan, the needles that drive the scan come from Plan.Required,
// the AND/OR tree of literals every matching line contains. Each conjunct
// of its AND that reduces to literals is a candidate driver (a single
// literal, or a set such as `|= "a" or "b"`, a regex like "error|fail",
// or a (?i) literal with the Unicode partners of k and s). Length is a
// poor guess at rarity (in structured logs "level=info" is long and in
// every line), so each block picks the candidate with the fewest hits in
// its first 32 KiB (needle.Count over the sample, a few µs). The driver
// scans the whole block once per needle, candidate entries merged in
// order; the other filters then check each candidate. Negative literal
// filters (!= "x") also run as whole-block scans, whose hits exclude
// entries. When the plan has parser or label stages, candidates are
// confirmed with Plan.MatchEntry; otherwise only with the line filters
// the scans did not already decide, so a plan that is one literal needs
// no confirmation at all. A plan with no positive literal (only negative
// filters, or a regex with no required literal) visits every entry. The
// measurements behind these choices (BenchmarkPlanBlock, and the CLI on
// 1M lines) are in docs/BENCHMARKS.md, "Queries (issue 5)".
//
// A part that implements Skipper (a per-block skip index) is asked about
// the required literals of each block before it is read: a block the
// index rules out is skipped. With context entries (Before, After), its
// neighbours in each stream are read as far as they may hold context (a
// low count of their entries decides), and where blocks were skipped the
// stream's context restarts, as grep's would after unprinted lines.
//
// Blocks are decoded and scanned by a bounded pool of workers (one per
// core by default) and their results reassembled in order, so output order
// is the store's order whatever the parallelism. At most 2×workers decoded
// blocks are in flight, which bounds memory. The scan stops early at the
// limit or when the context is cancelled. Merging S streams (below) needs
// one current block per stream, so it holds at most max(2×workers, S)
// decoded blocks. Past 2×workers streams, a block whose hits are at most
// half its bytes hands its runs a heap copy of just those entries and
// goes back to the pool at once, so that a selective search over many
// streams holds their hits, not a block each. With context the copy keeps
// every entry's time, stream and place, and the lines of those the
// context may show (see markContext). A block that holds several of the merged streams is
// decoded once and shared by their runs (reference counted), since the
// merge keeps the runs at about the same point in time; it is also
// matched once, for all its streams, its hits grouped by stream so that
// each run takes its own without scanning the block (matching it once per
// run cost O(streams × entries): 16 s for 10 lines of 20,000 streams).
// While runs that will read the block have not come yet, it is kept
// (decoded, or only its match results) within a budget, so that a
// selective query, whose runs mostly let go of a block at once, does not
// decode and match it again for each (see blockCache).
//
// # Order
//
// Oldest (the default) is by entry time, ties by stream id (the stream
// ingested first), then by ingestion order; Newest is exactly its
// reverse. Stored is grep's order: each stream in ingestion order,
// streams merged by time, ties to the lower stream id; where each
// stream's times ascend it is Oldest. Counting and histograms need no
// order and use a single run.
//
// Each selected stream is scanned as one run (one run in all when a
// single stream is present) and the runs are merged by their current
// entry (runHeap), so each run must deliver its stream in order. Entries
// are stored in arrival order, and a stream's times can go backwards:
// Loki accepts out-of-order pushes, a file's clock can jump back, and
// the Loghub samples of Apache, Linux and Zookeeper all do. A time-ordered
// run therefore visits its blocks by time bound (MinTime clipped to the
// range, ascending; for Newest MaxTime descending; stable, so blocks whose
// streams' times ascend keep their store order), sorts a block's hits by
// time only when one pass finds them out of order, and delivers an entry
// only once no block still to come can hold an earlier one: the next
// block's bound is later, or equal and all the blocks left lie later in
// the store. Otherwise it takes the next block first and merges the
// blocks it holds (run.advanceByTime); past maxHeld decoded blocks the
// hits left in one are copied out. With a limit, the hits the runs hold
// beyond the limit's reach (more undelivered entries before them than
// the merge may still deliver) are dropped as blocks are taken
// (exec.trim), so that the copies are bounded by the limit, not by the
// store, and a run takes no block that holds only entries past them.
// Where a stream's times ascend every entry of a block of that stream
// alone passes at once, so nothing is held, copied or sorted, and a
// limit stops the scan after as few blocks as in store order. Block time
// ranges are per block, not per stream: a block shared with a stream
// whose times run ahead can make a run take the next block before
// delivering (one more block read for a limit over interleaved streams;
// but every block when another stream's clock lags far behind, Newest:
// runs far ahead, as every block's bound is then that stream's: review
// 8, F5, which needs per-stream bounds in the block index). Disorder
// costs only where it is, and the limit stays exact.
//
// With context (Before, After, Grouped), runs keep their stream's
// ingestion order whatever Order is, as grep's context does (a group is
// its file neighbours); Newest then delivers each stream backwards.
//
// # Context
//
// Query.Before and Query.After ask for context entries around each match,
// as grep -B and -A: entries of the SAME stream just before and after it
// in that stream's ingestion order (and in the time range). A group of
// matches and context is contiguous in its stream; overlapping groups are
// merged and every entry is delivered once. Match.GroupStart marks the
// first entry of a group, where grep prints "--" (a printer skips it for
// the first entry it prints). In Newest order, groups come out reversed, so
// the output is the Oldest (with context: Stored) output backwards. With a
// limit, the trailing After context of the last match is still delivered,
// whatever it holds, as grep -m does.
//
// # Structured metadata
//
// Each delivered entry, context entries included, carries its structured
// metadata (Match.Attrs, package attrs' encoding), read from the block
// with its line and copied with it wherever a merge copies hits. Patterns
// and line filters match the line only, never the metadata; a plan's
// label filters see the metadata as labels of the entry
// (Plan.MatchEntryAttrs). Where a segment's skip index also covers the
// metadata values (segment format 5, MetaSkipper), a label filter that
// needs a value (query.Plan.MetaIndex: `| trace_id="5f89..."` before any
// parser) skips the blocks none of whose selected streams could pass it:
// the incident's way in, a trace id, then decodes the block or two that
// hold the trace rather than every block of the selected streams
// (docs/BENCHMARKS.md, "Skip index over metadata"). After a parser
// (`| json | trace_id="5f89..."`) the value may also be in the line,
// maybe escaped: query.Plan.LabelIndex asks both indexes (MayMatchNeed;
// docs/BENCHMARKS.md, "Label filters after a parser use the skip
// index"), a segment for all its blocks at once (needBlocks, as
// mayMatchBlocks for line filters); a format-7 segment answers whether
// a block holds an escape of one of the value's ASCII characters from
// its escape grams (EscapeSkipper), older ones from the escapes' own
// 4-grams, which Go's `\u003c` and hex ids put in most blocks. A
// filter that needs an exact value (`name="v"`, `=~"a|b"`:
// query.Need.Exact) also asks format 6's per-block filters of whole
// values (ValueFilter), which rule a block out where the values' grams
// cannot: hex ids of ~14,000 short entries a block hold almost every hex
// 4-gram (review R11c-2; docs/BENCHMARKS.md, "Skip index over metadata").
// The head is never skipped for label filters; a format-4 segment's
// index does not know metadata values, so its blocks go only where the
// streams' labels decide.
//
// A caller that never looks at metadata (a count, a listing of lines)
// sets Query.SkipAttrs: segment blocks are then read without it (their
// attrs section neither decompressed nor validated), unless the plan's
// label filters need it to decide (NeedsAttrs). The results are the same;
// only Match.Attrs may be empty. The zero value reads metadata.
package search

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/needle"
)

// Order is the order results are delivered in.
type Order int

const (
	Oldest Order = iota // by time ascending, ties by stream id, then ingestion order
	Newest              // the exact reverse of Oldest
	// Stored is each stream in ingestion order, streams merged by time
	// ascending: grep's order for one ingested file, and Oldest where
	// each stream's times ascend. See Order in the package doc.
	Stored
)

// Bounds is the inclusive range of times q admits, from Since, Until and
// their Set flags; first > last when it admits none (an Until at the
// earliest time).
func (q *Query) Bounds() (first, last int64) {
	first, last = q.Since, math.MaxInt64
	if q.Since == 0 && !q.SinceSet {
		first = math.MinInt64
	}
	if q.Until != 0 || q.UntilSet {
		if q.Until == math.MinInt64 {
			return math.MinInt64 + 1, math.MinInt64
		}
		last = q.Until - 1
	}
	return first, last
}

// Query says what to search for and how to deliver it.
type Query struct {
	// Pattern is a literal (grep -F); empty matches every entry. Fold
	// makes it ASCII case-insensitive. Both are ignored when Plan is set.
	Pattern []byte
	Fold    bool

	// Plan is a compiled LogQL query (query.Compile). It needs Labels.
	Plan *query.Plan
	// Labels returns a stream's canonical label string ({a="x"}, as
	// store.Snapshot.Labels does), for the plan's stream selector and
	// label filters.
	Labels func(stream uint32) string
	// Index, when set, is the parts' stream index: the selector is then
	// answered from its postings (SelectStreams) and only the selected
	// streams' labels are parsed, instead of every stream's in the
	// parts. Labels is not needed with it.
	Index *store.StreamIndex

	// Entries with Since <= time < Until match. Zero values mean no bound
	// (a zero Until admits math.MaxInt64 itself), unless SinceSet or
	// UntilSet says that zero is the instant 1970-01-01T00:00:00Z.
	Since, Until       int64
	SinceSet, UntilSet bool
	Limit              int64 // stop after this many matches; 0 means no limit
	Count              bool  // only count: Run's emit is not called
	Order              Order
	// Before and After are the numbers of context entries wanted before
	// and after each match (grep -B and -A), in the stream's ingestion
	// order, whatever Order is. They are ignored when counting.
	Before, After int
	// Grouped marks groups (Match.GroupStart) even when Before and After
	// are 0, as grep -C 0 prints "--" between matches that are not
	// neighbours.
	Grouped bool
	Workers int // 0 means GOMAXPROCS

	// SkipAttrs says the caller never looks at Match.Attrs (a count, a
	// listing of lines): segment blocks are then read without their
	// structured metadata (segment.Reader.ReadBlockLines: the attrs
	// section is neither decompressed nor validated, which with OTel
	// trace and span ids on every entry cost ~3x a scan's decoding), and
	// Match.Attrs may be empty. A plan whose matching can depend on
	// metadata (NeedsAttrs: a label filter) still reads it, so results
	// are the same with and without. The zero value reads metadata: a
	// caller that does not know about the field never loses it.
	SkipAttrs bool

	// NoIndex bypasses the skip index: every block in the time range with
	// a selected stream is decoded (brute force). Results are identical;
	// it exists as a built-in oracle for the index and for measuring it.
	NoIndex bool
	// Stats, when not nil, receives the block counts of the search when
	// Run or Hist returns.
	Stats *Stats
	// Progress, when not nil, is updated while Run or Hist runs, for a
	// progress display on another goroutine.
	Progress *Progress
}

// Progress counts a running search's block tasks: Total is set once the
// blocks to read are known (a block merged for S streams counts S times),
// and Done counts the tasks finished. A search that stops early (limit,
// cancellation) leaves Done below Total.
type Progress struct {
	Total, Done atomic.Int64
}

// Stats counts what a search did with the blocks of its parts. Every
// block is counted once in Blocks and at most once in one of the Pruned
// counts; kept blocks are decoded unless the block index alone answers
// (a count of every entry) or the search stopped early. When counting,
// each kept block is read once.
type Stats struct {
	Blocks       int64 // blocks in the parts
	PrunedTime   int64 // outside the time range (or empty)
	PrunedStream int64 // holding no selected stream
	PrunedIndex  int64 // ruled out by the skip index
	Decoded      int64 // block reads: merging streams may read a block once per selected stream in it
	Compacted    int64 // decoded blocks whose hits a merge of many streams copied out (see compactHits)
	// PeakCopied is the most bytes (lines and metadata, plus 20 a hit for time,
	// stream, offset and index) that time-ordered runs held at once in
	// copies of the hits of blocks they could not deliver yet
	// (cursor.detach, and compactHits' copies). With a limit it is
	// bounded by the limit, not by the store.
	PeakCopied int64
}

// Match is a delivered entry. Line is valid only during the emit call.
type Match struct {
	Time   int64
	Stream uint32
	Line   []byte
	// Attrs is the entry's structured metadata (package attrs'
	// encoding, empty for none), valid like Line.
	Attrs []byte
	// Context is set on a context entry (Query.Before/After), which is
	// not a match and not counted.
	Context bool
	// GroupStart is set, when context was asked for, on the first entry of
	// a group: the previous entry delivered from this stream, if any, is
	// not its neighbour.
	GroupStart bool
}

// Run searches parts (in ingestion order) and calls emit for each match
// (and context entry) in order, unless q.Count. It returns the number of
// matches. A damaged block is reported to onErr (the error names the file
// and block) and skipped; the search goes on. An error from emit or the
// context stops the search and is returned.
func Run(ctx context.Context, parts []store.Part, q Query, emit func(*Match) error, onErr func(error)) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, err := newExec(parts, q)
	if err != nil {
		return 0, err
	}
	defer e.report() // after wg.Wait: the workers have stopped
	if len(e.tasks) == 0 {
		// Every block was pruned (or there are none): no goroutine to
		// start. A short CLI search that the skip index answers would
		// otherwise spend more on waking threads than on the search.
		return 0, ctx.Err()
	}
	merging := !e.q.Count && len(e.present) > 1
	withContext := !e.q.Count && (e.q.Before > 0 || e.q.After > 0 || e.q.Grouped)
	if merging {
		e.cache = &blockCache{m: map[blockKey]*cachedBlock{}, budget: 2 * e.workers * segment.DefaultBlockSize}
		e.compact = len(e.present) > 2*e.workers
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs before wg.Wait: stop the workers first
	// No more workers than blocks: each idle one would cost a thread.
	for range min(e.workers, len(e.tasks)) {
		wg.Go(func() { e.worker(ctx) })
	}

	if !merging {
		stream := int64(-1)
		if withContext && len(e.present) == 1 {
			// Blocks kept for context may hold other selected streams,
			// whose entries are not this stream's context.
			stream = int64(e.present[0])
			e.markGaps(e.tasks, stream)
		}
		if p := e.q.Progress; p != nil {
			p.Total.Store(int64(len(e.tasks)))
		}
		r := e.start(ctx, &wg, e.tasks, 2*e.workers, stream)
		if e.q.Count {
			return e.drain(ctx, r, onErr)
		}
		return e.merge(ctx, []*run{r}, emit, onErr)
	}
	// Each run needs its current block decoded to take part in the merge,
	// so merging S streams holds max(2×workers, S) decoded blocks, or
	// copies of their hits (e.compact).
	window := max(1, 2*e.workers/len(e.present))
	byStream := e.streamTasks(withContext)
	if p := e.q.Progress; p != nil {
		total := 0
		for _, st := range byStream {
			total += len(st)
		}
		p.Total.Add(int64(total))
	}
	runs := make([]*run, len(e.present))
	for i, s := range e.present {
		runs[i] = e.start(ctx, &wg, byStream[i], window, int64(s))
	}
	return e.merge(ctx, runs, emit, onErr)
}

// Buckets are N consecutive time buckets of Width nanoseconds from Start:
// bucket i holds Start+i*Width <= time < Start+(i+1)*Width.
type Buckets struct {
	Start, Width int64
	N            int
}

// Hist counts the matches of q in each bucket (entries outside all
// buckets are not counted); q.Limit, q.Count, q.Order and context are
// ignored. Damaged blocks go to onErr, as in Run.
func Hist(ctx context.Context, parts []store.Part, q Query, b Buckets, onErr func(error)) ([]int64, error) {
	if b.N <= 0 || b.Width <= 0 {
		return nil, errors.New("search: histogram needs N > 0 buckets of positive width")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q.Count, q.Limit, q.Order, q.Before, q.After = true, 0, Oldest, 0, 0
	e, err := newExec(parts, q)
	if err != nil {
		return nil, err
	}
	e.hist = &b
	defer e.report()
	counts := make([]int64, b.N)
	if len(e.tasks) == 0 {
		return counts, ctx.Err() // as in Run: nothing to start
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if p := e.q.Progress; p != nil {
		p.Total.Store(int64(len(e.tasks)))
	}
	for range min(e.workers, len(e.tasks)) {
		wg.Go(func() { e.worker(ctx) })
	}
	r := e.start(ctx, &wg, e.tasks, 2*e.workers, -1)
	for {
		t, err := r.next(ctx)
		if err != nil {
			return counts, err
		}
		if t == nil {
			return counts, nil
		}
		if t.res.err != nil {
			onErr(t.res.err)
			continue
		}
		for i, c := range t.res.buckets {
			counts[i] += c
		}
	}
}

// TimeRange returns the smallest and largest entry time q can match,
// from the block index alone (no block is read): the bounds of the blocks
// in q's time range that hold a selected stream, clipped to the range.
// ok is false when no block qualifies.
func TimeRange(parts []store.Part, q Query) (lo, hi int64, ok bool) {
	e, err := newExec(parts, q)
	if err != nil {
		return 0, 0, false
	}
	lo, hi = math.MaxInt64, math.MinInt64
	for _, t := range e.tasks {
		m := parts[t.part].BlockMeta(t.block)
		lo, hi = min(lo, max(m.MinTime, e.q.Since)), max(hi, min(m.MaxTime, e.last))
	}
	return lo, hi, len(e.tasks) > 0
}

// bucketWidths are the histogram widths ChooseBuckets rounds to.
var bucketWidths = []int64{
	1e9, 5e9, 10e9, 30e9, 60e9, 5 * 60e9, 10 * 60e9, 30 * 60e9,
	3600e9, 3 * 3600e9, 6 * 3600e9, 12 * 3600e9, 86400e9, 7 * 86400e9, 30 * 86400e9,
}

// ChooseBuckets picks buckets covering lo..hi (inclusive, nanoseconds):
// the smallest width of 1s, 5s, 10s, 30s, 1m, 5m, 10m, 30m, 1h, 3h, 6h,
// 12h, 1d, 7d, 30d (then whole multiples of 30d) that needs at most max
// buckets, with Start aligned to a multiple of the width (UTC). With max
// 60 that gives between 12 and 60 buckets for ranges over a minute.
func ChooseBuckets(lo, hi int64, maxN int) Buckets {
	if hi < lo {
		hi = lo
	}
	maxN = max(maxN, 1)
	start := func(w int64) int64 {
		s := lo / w * w
		if s > lo && s >= math.MinInt64+w { // negative times round down too
			s -= w
		}
		return s
	}
	// hi-start in uint64: a store may span more than int64's 292 years
	// of positive nanoseconds (1677 to 2262).
	n := func(w int64) int64 { return int64((uint64(hi)-uint64(start(w)))/uint64(w)) + 1 }
	w := bucketWidths[len(bucketWidths)-1]
	for _, c := range bucketWidths {
		if n(c) <= int64(maxN) {
			w = c
			break
		}
	}
	for n(w) > int64(maxN) {
		w += bucketWidths[len(bucketWidths)-1]
	}
	return Buckets{Start: start(w), Width: w, N: int(n(w))}
}

type exec struct {
	q       Query
	last    int64 // the latest matching time (inclusive): Until-1, or no bound
	parts   []store.Part
	workers int
	rev     bool // Newest: iterate backwards

	// drivers are needle sets that can drive the scan, best guess first:
	// every match contains a needle of each set. A block is scanned with
	// the set whose needles are rarest in a sample of it. None: every
	// entry is a candidate.
	drivers []driverSet
	free    []*query.Filter    // filters to check per candidate when no driver is used
	excl    []*needle.Searcher // negative literals: entries holding one are dropped by a block scan
	stages  bool               // the plan has parser or label stages: confirm with MatchEntry
	none    bool               // nothing can match
	// linesOnly: read blocks without their metadata (Query.SkipAttrs,
	// and the plan does not need it to match).
	linesOnly bool

	sel     []bool                   // by stream id: selected; nil selects all
	labels  map[uint32][]query.Label // of the selected streams, for MatchEntry
	present []uint32                 // selected streams in kept blocks, ascending
	tasks   []task                   // kept blocks, in iteration order
	hist    *Buckets

	stats   Stats
	decoded atomic.Int64
	copied  atomic.Int64 // Stats.Compacted
	cache   *blockCache  // merging: blocks shared by the stream runs
	// compact: merging more streams than the task window bounds; a block
	// whose hits (and context) are a small part of it hands its runs a
	// copy of just those entries (see compactHits and contextCopy).
	compact bool

	// Time order with a limit (see trim): emitted is the number of
	// matches merged so far; tails holds the cursors of every run, live
	// counts the hits they have left (not delivered yet). Only the
	// merge's goroutine touches them.
	emitted int64
	tails   cursorHeap
	live    int64
	// cut is the first hit trim dropped, in delivery order (cutSet): it
	// and every entry after it are past the limit.
	cut    hitKey
	cutSet bool
	// The bytes held in copies of hits (cursor.detach, compactHits), and
	// their peak (Stats.PeakCopied); with a limit, the bytes of the hits
	// left in them (trim).
	copyBytes, peakCopy int64
	copyLive            int64

	work chan *task
}

// report copies the block counts to q.Stats.
func (e *exec) report() {
	if e.q.Stats != nil {
		*e.q.Stats = e.stats
		e.q.Stats.Decoded = e.decoded.Load()
		e.q.Stats.Compacted = e.copied.Load()
		e.q.Stats.PeakCopied = e.peakCopy
	}
}

func newExec(parts []store.Part, q Query) (*exec, error) {
	// last is the latest time that matches: no bound means every time,
	// math.MaxInt64 included.
	var last int64
	q.Since, last = q.Bounds()
	if q.Before < 0 || q.After < 0 || q.Limit < 0 {
		return nil, errors.New("search: negative context or limit")
	}
	workers := q.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	e := &exec{q: q, last: last, parts: parts, workers: workers, rev: q.Order == Newest, work: make(chan *task, workers)}
	e.linesOnly = q.SkipAttrs && !NeedsAttrs(q.Plan)
	if err := e.prepare(); err != nil {
		return nil, err
	}

	// The blocks the time range keeps, and the streams in them.
	var maxID uint32
	for _, p := range parts {
		for bi := range p.NumBlocks() {
			// A block's streams are sorted (segment.BlockMeta).
			if ss := p.BlockMeta(bi).Streams; len(ss) > 0 {
				maxID = max(maxID, ss[len(ss)-1])
			}
		}
	}
	if q.Plan != nil && q.Index != nil {
		e.selectIndexed(maxID)
	} else if q.Plan != nil {
		if q.Labels == nil {
			return nil, errors.New("search: a plan needs Query.Labels")
		}
		e.sel = make([]bool, maxID+1)
		e.labels = map[uint32][]query.Label{}
		done := make([]bool, maxID+1)
		for _, p := range parts {
			for bi := range p.NumBlocks() {
				for _, s := range p.BlockMeta(bi).Streams {
					if done[s] {
						continue
					}
					done[s] = true
					ls, err := ingest.ParseLabels(q.Labels(s))
					if err != nil {
						return nil, fmt.Errorf("search: labels of stream %d: %w", s, err)
					}
					ql := make([]query.Label, len(ls))
					for i, l := range ls {
						ql[i] = query.Label(l)
					}
					e.labels[s] = ql
					e.sel[s] = q.Plan.MatchStream(ql)
				}
			}
		}
	}
	for _, p := range parts {
		e.stats.Blocks += int64(p.NumBlocks())
	}
	if e.none {
		return e, nil
	}
	// The skip index may rule a block out. With context, a block without
	// matches can still hold context entries of its neighbours: see
	// keepForContext.
	req := e.required()
	useSkip := req != nil && !q.NoIndex
	// Label filters that need a value consult the index too: the values'
	// where it covers metadata (MetaSkipper), the lines' for a value a
	// parser may have taken from the line (query.Plan.LabelIndex).
	useLabels := q.Plan != nil && q.Plan.HasLabelIndex() && !q.NoIndex
	labelReq := map[uint32]*query.Need{}
	withContext := !q.Count && (q.Before > 0 || q.After > 0 || q.Grouped)
	seen := map[uint32]bool{}
	var cands []candidate // blocks the time range and streams keep
	var ord int64         // the position of the next block's first entry in the store
	for pi, p := range parts {
		sk, _ := p.(Skipper)
		// The whole part's answer (mayMatchBlocks), computed when a first
		// block passes the time range and the streams (a part out of
		// range costs no lookup: review 15d F6), and then kept even when
		// nil, which means every block may (review 15d F1: taking nil for
		// "not computed" asked per block again).
		bs, masked := sk.(BlockSkipper)
		masked = masked && useSkip
		var reqBlocks []uint64
		computed := false
		var labels *partNeeds // made for the first block that asks
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			ord += int64(m.Entries)
			if e.outOfRange(m) {
				e.stats.PrunedTime++
				continue
			}
			any := false
			for _, s := range m.Streams {
				if e.sel == nil || e.sel[s] {
					any = true
					break
				}
			}
			if !any {
				e.stats.PrunedStream++
				continue
			}
			may := sk == nil || !useSkip
			switch {
			case may:
			case masked:
				if !computed {
					reqBlocks, computed = mayMatchBlocks(req, bs, p.NumBlocks()), true
				}
				may = reqBlocks == nil || reqBlocks[bi/64]&(1<<(bi%64)) != 0
			default:
				may = MayMatch(req, sk, bi)
			}
			if may && useLabels && sk != nil {
				if labels == nil {
					labels = newPartNeeds(p, sk)
				}
				may = e.mayMatchLabels(labels, bi, m.Streams, labelReq)
			}
			if !may && !withContext {
				// Only context could keep it: skip it now, so that a
				// search the index answers lists no block at all.
				e.stats.PrunedIndex++
				continue
			}
			cands = append(cands, candidate{part: pi, block: bi, ord: ord - int64(m.Entries), may: may, keep: may})
		}
	}
	if withContext {
		e.keepForContext(cands)
	}
	for _, c := range cands {
		if !c.keep {
			e.stats.PrunedIndex++
			continue
		}
		for _, s := range e.parts[c.part].BlockMeta(c.block).Streams {
			// A stream is present if it may match somewhere: a block
			// kept only for context cannot start a run of its own.
			if (e.sel == nil || e.sel[s]) && (c.may || seen[s]) {
				seen[s] = true
			}
		}
		e.tasks = append(e.tasks, task{part: c.part, block: c.block, ord: c.ord, stream: -1})
	}
	for s := range seen {
		e.present = append(e.present, s)
	}
	slices.Sort(e.present)
	if e.rev {
		slices.Reverse(e.tasks)
	}
	return e, nil
}

// Skipper is implemented by a part with a per-block skip index (such as
// the n-gram filters of segment.Reader.MayContain): false means no entry
// of block i contains lit (ASCII case-insensitively when fold); true is a
// maybe. Run and Hist skip such blocks without reading them.
type Skipper interface {
	MayContain(block int, lit []byte, fold bool) bool
}

// MetaSkipper is implemented by a part whose skip index may also cover
// the entries' structured metadata values (segment format 5): when
// MetaIndexed is true, MayContainValue false means that no metadata value
// of block i contains lit (ASCII case-insensitively when fold). A part
// without it, or that answers false (an older segment), is never skipped
// for metadata.
type MetaSkipper interface {
	MetaIndexed() bool
	MayContainValue(block int, lit []byte, fold bool) bool
}

// ValueFilter is implemented by a part with per-block filters of whole
// structured metadata values (segment format 6): when ValueFiltered is
// true, MayHaveValue false means that no metadata value of the block
// equals v. It answers a Need leaf's Exact values, where the values'
// gram index saturates (hex ids in blocks of many short entries: R11c-2).
type ValueFilter interface {
	ValueFiltered() bool
	MayHaveValue(block int, v []byte) bool
}

// EscapeSkipper is implemented by a part whose lines' index may also
// record, per block, the ASCII characters its entries' escapes spell
// (segment format 7): when EscapeIndexed is true, MayHoldEscape false
// means that no entry of block i holds an escape (`\u0035`, `\x35`,
// ...) of c. MayMatchNeed answers a query.Need escape leaf with it;
// other parts answer the leaf's whole escapes' grams (Need.X).
type EscapeSkipper interface {
	EscapeIndexed() bool
	MayHoldEscape(block int, c byte) bool
}

// ExactSkipper is what MayMatchNeed asks of its values Skipper for a
// leaf's Exact values: MayHaveValue false means no metadata value of the
// block equals v. A values Skipper without it answers "maybe".
type ExactSkipper interface {
	MayHaveValue(block int, v []byte) bool
}

// valueSkipper asks a MetaSkipper's index of values, for MayMatch, and
// its value filters (vf, nil for none) for exact values.
type valueSkipper struct {
	ms MetaSkipper
	vf ValueFilter
}

func (v valueSkipper) MayContain(block int, lit []byte, fold bool) bool {
	return v.ms.MayContainValue(block, lit, fold)
}

func (v valueSkipper) MayHaveValue(block int, val []byte) bool {
	return v.vf == nil || v.vf.MayHaveValue(block, val)
}

// partNeeds answers the label requirements (query.Need) for the blocks
// of one part: for all its blocks at once, each requirement once, when
// the part can (whole), else block by block (MayMatchNeed).
type partNeeds struct {
	lines, values Skipper                  // MayMatchNeed's; values nil when p's index knows no metadata values
	whole         *needBlocks              // nil: block by block
	bms           map[*query.Need][]uint64 // whole's answers so far; nil: every block may
}

// newPartNeeds prepares the label requirements' answers for part p,
// whose lines' index is sk. A leaf on the metadata values is a maybe
// unless p's index covers them (MetaSkipper.MetaIndexed) or p has value
// filters (ValueFilter).
func newPartNeeds(p store.Part, sk Skipper) *partNeeds {
	pn := &partNeeds{lines: sk}
	var vf ValueFilter
	if ms, ok := p.(MetaSkipper); ok {
		vf, _ = p.(ValueFilter)
		if vf != nil && !vf.ValueFiltered() {
			vf = nil
		}
		// A format-6 segment whose values' gram index was given up
		// (unique ids that are not hex) still has its value filters;
		// its gram index then answers "maybe" (every block unindexed).
		if ms.MetaIndexed() || vf != nil {
			pn.values = valueSkipper{ms, vf}
		}
	}
	pn.whole = newNeedBlocks(p, sk, pn.values != nil, vf != nil)
	if pn.whole != nil {
		pn.bms = map[*query.Need][]uint64{}
	}
	return pn
}

// may reports whether an entry of block bi may meet x
// (MayMatchNeed(x, pn.lines, pn.values, bi)). With whole, x is evaluated
// for every block of the part the first time it is asked, and kept even
// when nil (every block may): asking block by block looked each literal
// up again for every block, and with more literals than a segment
// Reader caches (1,024), each lookup was a new one (review F7: an OR of
// 1,100 user_id values after logfmt).
func (pn *partNeeds) may(x *query.Need, bi int) bool {
	if pn.whole == nil {
		return MayMatchNeed(x, pn.lines, pn.values, bi)
	}
	bm, ok := pn.bms[x]
	if !ok {
		bm = pn.whole.eval(x)
		pn.bms[x] = bm
	}
	return bm == nil || bm[bi/64]&(1<<(bi%64)) != 0
}

// mayMatchLabels reports whether an entry of block bi (of the part pn
// answers for) may pass the plan's label filters as far as they need
// values (query.Plan.LabelIndex): whether some selected stream of the
// block needs nothing, or what it needs may be in the block. cache holds
// each stream's requirement.
func (e *exec) mayMatchLabels(pn *partNeeds, bi int, streams []uint32, cache map[uint32]*query.Need) bool {
	var failed []*query.Need // streams share requirements: ask once
	for _, s := range streams {
		if e.sel != nil && !e.sel[s] {
			continue
		}
		x, ok := cache[s]
		if !ok {
			labels, known := e.labels[s]
			if known {
				x = e.q.Plan.LabelIndex(labels)
			}
			// A stream whose labels were not parsed needs nothing: which
			// labels it has decides where a filter reads its value.
			cache[s] = x
		}
		if x == nil {
			return true
		}
		if slices.Contains(failed, x) {
			continue
		}
		if pn.may(x, bi) {
			return true
		}
		failed = append(failed, x)
	}
	return false
}

// EscapeBlockSkipper is an EscapeSkipper that also answers for all its
// blocks at once (segment.Reader.MayHoldEscapeBlocks): a bitmap as
// BlockSkipper's, nil when every block may; read-only.
type EscapeBlockSkipper interface {
	MayHoldEscapeBlocks(c byte) []uint64
}

// ValueBlockSkipper is a MetaSkipper that also answers for all its
// blocks at once (segment.Reader.MayContainValueBlocks): a bitmap as
// BlockSkipper's, nil when every block may; read-only.
type ValueBlockSkipper interface {
	MayContainValueBlocks(lit []byte, fold bool) []uint64
}

// ValueFilterBlocks is a ValueFilter that also answers for all its
// blocks at once (segment.Reader.MayHaveValueBlocks): a bitmap as
// BlockSkipper's, nil when every block may; read-only.
type ValueFilterBlocks interface {
	MayHaveValueBlocks(v []byte) []uint64
}

// needBlocks is MayMatchNeed for every block of a part at once.
type needBlocks struct {
	n      int                // blocks
	lines  BlockSkipper       // the lines' index
	esc    EscapeBlockSkipper // escape leaves' (nil: their X, on lines)
	values ValueBlockSkipper  // nil: a values leaf is a maybe
	exact  ValueFilterBlocks  // nil: Exact values are a maybe

	// escapes holds esc's answer for each ASCII character asked so far:
	// the escape leaves of many values share their characters.
	escapes map[byte][]uint64
}

// newNeedBlocks is the whole-part answer of part p (whose lines' index
// is sk) for the requirements MayMatchNeed answers with lines sk and a
// valueSkipper when values (with value filters when exact), or nil when
// p cannot answer some index for all its blocks at once.
func newNeedBlocks(p store.Part, sk Skipper, values, exact bool) *needBlocks {
	nb := &needBlocks{n: p.NumBlocks()}
	var ok bool
	if nb.lines, ok = sk.(BlockSkipper); !ok {
		return nil
	}
	if es, isEsc := sk.(EscapeSkipper); isEsc && es.EscapeIndexed() {
		if nb.esc, ok = sk.(EscapeBlockSkipper); !ok {
			return nil
		}
	}
	if values {
		if nb.values, ok = p.(ValueBlockSkipper); !ok {
			return nil
		}
	}
	if exact {
		if nb.exact, ok = p.(ValueFilterBlocks); !ok {
			return nil
		}
	}
	return nb
}

// eval is the bitmap of the blocks for which MayMatchNeed(x, ...) is
// true, or nil when it is true for all (it may also return a bitmap with
// every bit set); the bitmap is the caller's. An AND intersects, an OR
// unites, a leaf an index cannot answer is nil; each literal is looked
// up once.
func (nb *needBlocks) eval(x *query.Need) []uint64 {
	switch x.Op {
	case query.OpNone:
		return make([]uint64, (nb.n+63)/64)
	case query.OpLit:
		if x.Values {
			if nb.values == nil {
				return nil
			}
			var acc []uint64 // the Exact values' blocks; nil: every block
			if x.Exact != nil && nb.exact != nil {
				acc = make([]uint64, (nb.n+63)/64)
				for _, v := range x.Exact {
					b := nb.exact.MayHaveValueBlocks([]byte(v))
					if b == nil {
						acc = nil
						break
					}
					for w := range acc {
						acc[w] |= b[w]
					}
				}
			}
			return andBlocks(acc, mayMatchBlocks(x.X, valueBlocks{nb.values}, nb.n))
		}
		if x.Escaped != "" && nb.esc != nil {
			acc := make([]uint64, (nb.n+63)/64)
			for _, c := range []byte(x.Escaped) {
				b, ok := nb.escapes[c]
				if !ok {
					b = nb.esc.MayHoldEscapeBlocks(c)
					if nb.escapes == nil {
						nb.escapes = map[byte][]uint64{}
					}
					nb.escapes[c] = b
				}
				if b == nil {
					return nil
				}
				for w := range acc {
					acc[w] |= b[w]
				}
			}
			return acc
		}
		return mayMatchBlocks(x.X, nb.lines, nb.n)
	case query.OpAnd:
		var acc []uint64
		for _, s := range x.Sub {
			acc = andBlocks(acc, nb.eval(s))
			if acc != nil && !slices.ContainsFunc(acc, func(w uint64) bool { return w != 0 }) {
				return acc // no block may: the rest cannot add one
			}
		}
		return acc
	case query.OpOr:
		return unionBlocks(nb.n, x.Sub, nb.eval)
	}
	return nil
}

// unionBlocks is the union of eval's bitmaps of n blocks for subs (an
// OR's branches), a new one, or nil (every block may) as soon as one is.
func unionBlocks[T any](n int, subs []T, eval func(T) []uint64) []uint64 {
	acc := make([]uint64, (n+63)/64)
	for _, s := range subs {
		b := eval(s)
		if b == nil {
			return nil
		}
		for w := range acc {
			acc[w] |= b[w]
		}
	}
	return acc
}

// andBlocks intersects a and b, bitmaps the caller owns (nil: every
// block), into one of them.
func andBlocks(a, b []uint64) []uint64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	for w := range a {
		a[w] &= b[w]
	}
	return a
}

// valueBlocks asks a ValueBlockSkipper's index of values, for
// mayMatchBlocks.
type valueBlocks struct{ v ValueBlockSkipper }

func (v valueBlocks) MayContainBlocks(lit []byte, fold bool) []uint64 {
	return v.v.MayContainValueBlocks(lit, fold)
}

// MayMatchNeed evaluates a requirement on both skip indexes (from
// query.Plan.LabelIndex) for block: lines answers its leaves on lines,
// values those on metadata values (and their Exact values, when it is an
// ExactSkipper; lines answers escape leaves, query.Need.Escaped, with its
// escape grams when it is an EscapeSkipper that has them, else with the
// leaf's whole escapes); a nil one answers "maybe". False means no entry
// of the block can match.
func MayMatchNeed(n *query.Need, lines, values Skipper, block int) bool {
	switch n.Op {
	case query.OpNone:
		return false
	case query.OpLit:
		sk := lines
		if n.Values {
			sk = values
		}
		if sk == nil {
			return true
		}
		if es, ok := sk.(ExactSkipper); ok && n.Values && n.Exact != nil && !mayHaveAny(es, n.Exact, block) {
			return false
		}
		if es, ok := sk.(EscapeSkipper); ok && !n.Values && n.Escaped != "" && es.EscapeIndexed() {
			// An escape leaf on a segment with escape grams: exact,
			// where the whole escapes' grams (X) are in most blocks of
			// hex ids and a Go service's `\u003c`.
			for _, c := range []byte(n.Escaped) {
				if es.MayHoldEscape(block, c) {
					return true
				}
			}
			return false
		}
		return MayMatch(n.X, sk, block)
	case query.OpAnd:
		for _, s := range n.Sub {
			if !MayMatchNeed(s, lines, values, block) {
				return false
			}
		}
		return true
	case query.OpOr:
		for _, s := range n.Sub {
			if MayMatchNeed(s, lines, values, block) {
				return true
			}
		}
		return false
	}
	return true
}

// mayHaveAny reports whether block may hold a metadata value equal to
// one of vals.
func mayHaveAny(es ExactSkipper, vals []string, block int) bool {
	for _, v := range vals {
		if es.MayHaveValue(block, []byte(v)) {
			return true
		}
	}
	return false
}

// required is what every match contains, for the skip index; nil when
// nothing is required.
func (e *exec) required() *query.Expr {
	return Required(e.q.Plan, e.q.Pattern, e.q.Fold)
}

// Required is what every entry matching plan p (or, when p is nil, the
// literal pattern, ASCII case-insensitively when fold) contains, as a tree
// for MayMatch; nil when nothing is required.
func Required(p *query.Plan, pattern []byte, fold bool) *query.Expr {
	if p != nil {
		// Index, not Required: the same requirement with literals long
		// enough for the index's grams (query.IndexLiterals).
		r := p.Index
		if r == nil {
			r = p.Required
		}
		if r == nil || r.Op == query.OpAll {
			return nil
		}
		return r
	}
	if len(pattern) == 0 {
		return nil
	}
	text := string(pattern)
	if fold {
		text = lowerASCII(pattern) // a fold Lit is lowered in ASCII
	}
	return &query.Expr{Op: query.OpLit, Lit: query.Lit{Text: text, Fold: fold}}
}

func lowerASCII(b []byte) string {
	out := []byte(string(b))
	for i, c := range out {
		if 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

// MayMatch evaluates a required-literal tree (from Required) against
// block's skip index: false means no entry of the block can match.
func MayMatch(x *query.Expr, sk Skipper, block int) bool {
	switch x.Op {
	case query.OpNone:
		return false
	case query.OpLit:
		return x.Lit.Text == "" || sk.MayContain(block, []byte(x.Lit.Text), x.Lit.Fold)
	case query.OpAnd:
		for _, s := range x.Sub {
			if !MayMatch(s, sk, block) {
				return false
			}
		}
		return true
	case query.OpOr:
		for _, s := range x.Sub {
			if MayMatch(s, sk, block) {
				return true
			}
		}
		return false
	}
	return true
}

// BlockSkipper is a Skipper that also answers for all its blocks at
// once (segment.Reader.MayContainBlocks): a bitmap with bit i%64 of word
// i/64 set when block i may contain lit, or nil when every block may.
// The bitmap is read-only.
type BlockSkipper interface {
	Skipper
	MayContainBlocks(lit []byte, fold bool) []uint64
}

// blockContainer is what mayMatchBlocks asks of an index: a
// BlockSkipper's MayContainBlocks (or valueBlocks').
type blockContainer interface {
	MayContainBlocks(lit []byte, fold bool) []uint64
}

// mayMatchBlocks is MayMatch for every block of a part of n blocks at
// once: a bitmap of the blocks for which MayMatch(x, sk, block) is true,
// or nil when it is true for all (it may also return a bitmap with every
// bit set). Each literal is looked up once, where MayMatch per block
// looks each up once per block (review 15 H100-1: with more literals
// than the segment's cache of literal bitmaps holds, every lookup was a
// new one).
func mayMatchBlocks(x *query.Expr, sk blockContainer, n int) []uint64 {
	switch x.Op {
	case query.OpNone:
		return make([]uint64, (n+63)/64)
	case query.OpLit:
		if x.Lit.Text == "" {
			return nil
		}
		bm := sk.MayContainBlocks([]byte(x.Lit.Text), x.Lit.Fold)
		if bm == nil {
			return nil
		}
		return slices.Clone(bm)
	case query.OpAnd:
		var acc []uint64
		for _, s := range x.Sub {
			b := mayMatchBlocks(s, sk, n)
			if b == nil {
				continue
			}
			if acc == nil {
				acc = b
				continue
			}
			for w := range acc {
				acc[w] &= b[w]
			}
		}
		return acc
	case query.OpOr:
		return unionBlocks(n, x.Sub, func(s *query.Expr) []uint64 { return mayMatchBlocks(s, sk, n) })
	}
	return nil
}

// driverSet is one way to drive a block scan.
type driverSet struct {
	needles []*needle.Searcher
	checks  []*query.Filter // the filters candidates must still pass (no stages)
}

// confirm reports whether candidates found with driver set d (nil: no
// driver) need checking beyond time and stream.
func (e *exec) confirm(d *driverSet) bool {
	if e.stages {
		return true
	}
	if d == nil {
		return len(e.free) > 0
	}
	return len(d.checks) > 0
}

// prepare chooses the needles that drive the scan and what candidates
// must still pass.
func (e *exec) prepare() error {
	p := e.q.Plan
	if p == nil {
		if len(e.q.Pattern) > 0 {
			s := needle.New(e.q.Pattern)
			if e.q.Fold {
				s = needle.NewFold(e.q.Pattern)
			}
			e.drivers = []driverSet{{needles: []*needle.Searcher{s}}}
		}
		return nil
	}
	if p.Required != nil && p.Required.Op == query.OpNone {
		e.none = true
		return nil
	}
	for _, st := range p.Query.Stages {
		if _, ok := st.(*query.LineFilter); !ok {
			e.stages = true // parsers and label filters
		}
	}
	// Without stages, candidates are checked with the line filters alone,
	// minus those the scan already decided: negative literal filters run
	// as block scans that exclude entries, and a driver's own filter.
	var rest []*query.Filter
	for _, f := range p.Filters {
		if !e.stages && (f.Kind == query.NotContains || f.Kind == query.NotContainsAny) && plainAlts(f) {
			for _, a := range f.Alts {
				e.excl = append(e.excl, searcher(a.Needle))
			}
			continue
		}
		rest = append(rest, f)
	}
	e.free = rest
	var sets [][]query.Lit
	if r := p.Required; r != nil && r.Op == query.OpAnd {
		for _, sub := range r.Sub {
			if l, ok := driver(sub); ok {
				sets = append(sets, l)
			}
		}
	} else if l, ok := driver(r); ok {
		sets = append(sets, l)
	}
	sort.SliceStable(sets, func(i, j int) bool { return better(sets[i], sets[j]) })
	if len(sets) > maxDrivers {
		sets = sets[:maxDrivers]
	}
	for _, lits := range sets {
		d := driverSet{}
		for _, l := range lits {
			d.needles = append(d.needles, searcher(l))
		}
		for _, f := range rest {
			if !implied(f, lits) {
				d.checks = append(d.checks, f)
			}
		}
		e.drivers = append(e.drivers, d)
	}
	return nil
}

// maxDrivers bounds the needle sets sampled per block.
const maxDrivers = 4

func searcher(l query.Lit) *needle.Searcher {
	if l.Fold {
		return needle.NewFold([]byte(l.Text))
	}
	return needle.New([]byte(l.Text))
}

// plainAlts reports whether a filter's alternatives are all literals that
// the needle kernel decides alone: no regex, and no (?i) literal with k or
// s, whose Unicode partners (KELVIN SIGN, LONG S) the filter also accepts.
func plainAlts(f *query.Filter) bool {
	for _, a := range f.Alts {
		if a.Regexp != nil || a.Needle.Fold && strings.ContainsAny(a.Needle.Text, "ks") {
			return false
		}
	}
	return true
}

// implied reports whether every entry found by scanning for lits (it
// contains one of them) passes f: f is a positive literal filter whose
// alternatives include all of lits.
func implied(f *query.Filter, lits []query.Lit) bool {
	if f.Negate || !plainAlts(f) {
		return false
	}
	for _, l := range lits {
		found := false
		for _, a := range f.Alts {
			found = found || a.Needle == l
		}
		if !found {
			return false
		}
	}
	return true
}

// driver picks the literals to scan for from a required-literal tree: a
// set such that every matching line contains at least one of them. It
// prefers fewer needles, then longer ones (the shortest of the set
// counts). ok is false when no such set exists (OpAll somewhere on every
// path) or a literal is empty.
func driver(e *query.Expr) ([]query.Lit, bool) {
	if e == nil {
		return nil, false
	}
	switch e.Op {
	case query.OpLit:
		if e.Lit.Text == "" {
			return nil, false
		}
		return []query.Lit{e.Lit}, true
	case query.OpAnd:
		var best []query.Lit
		found := false
		for _, s := range e.Sub {
			l, ok := driver(s)
			if ok && (!found || better(l, best)) {
				best, found = l, true
			}
		}
		return best, found
	case query.OpOr:
		var all []query.Lit
		for _, s := range e.Sub {
			l, ok := driver(s)
			if !ok {
				return nil, false
			}
			for _, x := range l {
				if !slices.Contains(all, x) {
					all = append(all, x)
				}
			}
		}
		return all, len(all) > 0
	}
	return nil, false
}

// better reports whether needle set a should drive rather than b.
func better(a, b []query.Lit) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	short := func(ls []query.Lit) (n int, fold bool) {
		n = math.MaxInt
		for _, l := range ls {
			if len(l.Text) < n {
				n, fold = len(l.Text), l.Fold
			}
		}
		return n, fold
	}
	na, fa := short(a)
	nb, fb := short(b)
	if na != nb {
		return na > nb
	}
	return !fa && fb // exact is a little cheaper than folded
}

type task struct {
	part, block int
	ord         int64 // the position of the block's first entry in the store (ingestion order)
	stream      int64 // -1: every selected stream
	gap         bool  // blocks of the run's stream were skipped right before this one
	users       int   // merging: the number of runs with a task for this block
	done        chan struct{}
	res         result
}

// candidate is a block the time range and stream selectors keep, with the
// skip index's answer (may) and whether it is searched (keep).
type candidate struct {
	part, block int
	ord         int64 // task.ord
	may, keep   bool
}

// keepForContext keeps, besides the blocks the skip index did not rule
// out, their neighbours that may hold context entries: walking away from
// each such block in a stream's order, blocks are kept until they hold at
// least Before (backwards) or After (forwards) entries of that stream. A
// block's entries of stream s are counted low, so as to keep too many
// rather than too few: all of them when the block holds only s and lies
// wholly in the time range, 1 when it holds s among others and lies wholly
// in the range, else 0 (and such a block is always kept).
func (e *exec) keepForContext(cands []candidate) {
	byStream := map[uint32][]int{} // stream -> indexes into cands, in order
	for i, c := range cands {
		for _, s := range e.parts[c.part].BlockMeta(c.block).Streams {
			if e.sel == nil || e.sel[s] {
				byStream[s] = append(byStream[s], i)
			}
		}
	}
	low := func(i int, s uint32) int {
		m := e.parts[cands[i].part].BlockMeta(cands[i].block)
		if timeOK, _ := e.whole(m); !timeOK {
			return 0
		}
		if len(m.Streams) == 1 {
			return m.Entries
		}
		return 1
	}
	for i, c := range cands {
		// A block partly outside the time range may hold no entry of a
		// stream in range; skipping it would then be taken for a gap in
		// that stream where there is none (see markGaps). Keep it.
		if timeOK, _ := e.whole(e.parts[c.part].BlockMeta(c.block)); !timeOK {
			cands[i].keep = true
		}
	}
	for s, seq := range byStream {
		for k, i := range seq {
			if !cands[i].may {
				continue
			}
			// A walk stops at a block that may match: it is kept, and its
			// own walk covers what lies beyond it. So the walks cost
			// O(blocks) per stream whatever Before and After are.
			for j, n := k-1, 0; j >= 0 && n < e.q.Before && !cands[seq[j]].may; j-- {
				cands[seq[j]].keep = true
				n += low(seq[j], s)
			}
			for j, n := k+1, 0; j < len(seq) && n < e.q.After && !cands[seq[j]].may; j++ {
				cands[seq[j]].keep = true
				n += low(seq[j], s)
			}
		}
	}
}

// streamTasks splits e.tasks among the runs of a merge: element i lists
// the blocks holding stream e.present[i], in iteration order, as tasks of
// that stream, with their gaps (as markGaps sets them) when withContext.
// It reads each block's stream list once: O(blocks + block-stream pairs),
// where testing every stream against every task would be O(streams ×
// blocks), minutes with tens of thousands of streams.
func (e *exec) streamTasks(withContext bool) [][]task {
	runOf := make([]int32, e.present[len(e.present)-1]+1) // stream id -> index in present, or -1
	for i := range runOf {
		runOf[i] = -1
	}
	for i, s := range e.present {
		runOf[s] = int32(i)
	}
	run := func(s uint32) int32 {
		if int(s) < len(runOf) {
			return runOf[s]
		}
		return -1
	}
	// users: how many runs read a block, for the cache (cachedBlock).
	users := func(m segment.BlockMeta) int {
		n := 0
		for _, s := range m.Streams {
			if run(s) >= 0 {
				n++
			}
		}
		return n
	}
	out := make([][]task, len(e.present))
	if !withContext {
		for _, t := range e.tasks {
			m := e.parts[t.part].BlockMeta(t.block)
			t.users = users(m)
			for _, s := range m.Streams {
				if i := run(s); i >= 0 {
					t.stream = int64(s)
					out[i] = append(out[i], t)
				}
			}
		}
		return out
	}
	// markGaps for every stream in one walk over the store's blocks in
	// ingestion order: skipped[i] says a block of stream e.present[i] in
	// the time range was left out since that stream's last task.
	n := len(e.tasks)
	fwd := func(k int) task { // the k-th task in ingestion order
		if e.rev {
			return e.tasks[n-1-k]
		}
		return e.tasks[k]
	}
	skipped := make([]bool, len(e.present))
	next := 0
	for pi, p := range e.parts {
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			isTask := next < n && fwd(next).part == pi && fwd(next).block == bi
			if !isTask && e.outOfRange(m) {
				continue
			}
			nu := 0
			if isTask {
				nu = users(m)
			}
			for _, s := range m.Streams {
				i := run(s)
				if i < 0 {
					continue
				}
				if isTask {
					t := fwd(next)
					t.stream, t.gap, t.users = int64(s), skipped[i], nu
					out[i] = append(out[i], t)
				}
				skipped[i] = !isTask
			}
			if isTask {
				next++
			}
		}
	}
	if e.rev {
		for _, ts := range out {
			// Collected in ingestion order, each with the gap before it.
			// Backwards, the gap before a task is the one ingestion order
			// has after it, as markGaps does.
			slices.Reverse(ts)
			for k := len(ts) - 1; k > 0; k-- {
				ts[k].gap = ts[k-1].gap
			}
			if len(ts) > 0 {
				ts[0].gap = false
			}
		}
	}
	return out
}

// markGaps sets each task's gap: whether a block of the run's stream (all
// selected streams when stream < 0) that the time range and selectors
// keep was left out right before it, so that its context must not reach
// back across, nor join the entries after it into one group.
func (e *exec) markGaps(tasks []task, stream int64) {
	n := len(tasks)
	if n == 0 {
		return
	}
	// Walk the store's blocks in ingestion order; tasks are in iteration
	// order, reversed for Newest.
	fwd := func(k int) *task {
		if e.rev {
			return &tasks[n-1-k]
		}
		return &tasks[k]
	}
	gapBefore := make([]bool, n) // in ingestion order
	next, skipped := 0, false
walk:
	for pi, p := range e.parts {
		for bi := range p.NumBlocks() {
			if next == n {
				break walk
			}
			if t := fwd(next); t.part == pi && t.block == bi {
				gapBefore[next] = skipped
				skipped = false
				next++
				continue
			}
			m := p.BlockMeta(bi)
			if e.outOfRange(m) {
				continue
			}
			for _, s := range m.Streams {
				if (stream < 0 && (e.sel == nil || e.sel[s])) || int64(s) == stream {
					skipped = true
					break
				}
			}
		}
	}
	for i := range tasks {
		switch {
		case !e.rev:
			tasks[i].gap = gapBefore[i]
		case i > 0:
			// Going backwards, the gap before tasks[i] is the one that
			// ingestion order has after it, before tasks[i-1].
			tasks[i].gap = gapBefore[n-i]
		default:
			tasks[i].gap = false
		}
	}
}

type result struct {
	blk     *segment.Block // nil when counting
	cached  bool           // blk belongs to exec.cache, and so do hits and ents
	own     bool           // blk is a heap copy of the hits (compactHits), not pooled
	hits    []int32        // matching entries, ascending
	ents    []int32        // cached, with context: the stream's entries in the time range, ascending
	count   int64
	buckets []int64 // histogram counts
	err     error
}

func (e *exec) worker(ctx context.Context) {
	var sc scratch
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-e.work:
			e.do(t, &sc)
			close(t.done)
			if p := e.q.Progress; p != nil {
				p.Done.Add(1)
			}
		}
	}
}

// linesPart is a part that can read a block without its structured
// metadata (store.SegmentPart). The head's blocks are in memory: copying
// their metadata costs little, and they keep it.
type linesPart interface {
	ReadBlockLines(i int, dst *segment.Block) error
}

// readBlock reads block i of p into b, without its metadata when
// e.linesOnly and p can.
func (e *exec) readBlock(p store.Part, i int, b *segment.Block) error {
	if e.linesOnly {
		if lp, ok := p.(linesPart); ok {
			return lp.ReadBlockLines(i, b)
		}
	}
	return p.ReadBlock(i, b)
}

// NeedsAttrs reports whether which entries match p may depend on their
// structured metadata: p has a label filter (which sees metadata as
// labels of the entry), or a stage this package does not know. Line
// filters match the line only; parsers, drop and keep never drop an
// entry. A nil plan (a plain pattern) needs none. Whether a caller shows
// metadata (labels in a response) is its own question.
func NeedsAttrs(p *query.Plan) bool {
	if p == nil {
		return false
	}
	for _, st := range p.Query.Stages {
		switch st.(type) {
		case *query.LineFilter, *query.ParserStage, *query.DropStage:
		default:
			return true
		}
	}
	return false
}

// scratch is a worker's reusable memory.
type scratch struct {
	a, b, c, x, ks, slot, next []int32
	hits                       []int32 // a count's hits in one block (do)
}

func (e *exec) do(t *task, sc *scratch) {
	p := e.parts[t.part]
	m := p.BlockMeta(t.block)
	if e.cache != nil && len(m.Streams) > 1 {
		e.doShared(t, m, sc)
		return
	}
	timeOK, allSel := e.whole(m)
	if e.q.Count && e.hist == nil && len(e.drivers) == 0 && len(e.excl) == 0 && !e.confirm(nil) && timeOK && allSel && t.stream < 0 {
		// Every entry matches: the (checksummed) block index has the count.
		t.res.count = int64(m.Entries)
		return
	}
	b := segment.GetBlock()
	e.decoded.Add(1)
	if err := e.readBlock(p, t.block, b); err != nil {
		segment.PutBlock(b)
		t.res.err = err
		return
	}
	stream := t.stream
	if stream >= 0 && len(m.Streams) == 1 {
		stream = -1 // the whole block is that stream
	}
	if e.q.Count {
		// Only the count and the histogram are kept: the hits go to the
		// worker's scratch, not to a new slice per block (a frequent
		// needle's appends were most of a count's heap page faults).
		sc.hits = e.match(b, timeOK, allSel, stream, sc, sc.hits[:0], nil)
		t.res.hits = sc.hits
	} else {
		t.res.hits = e.match(b, timeOK, allSel, stream, sc, t.res.hits[:0], nil)
	}
	t.res.count = int64(len(t.res.hits))
	if h := e.hist; h != nil {
		t.res.buckets = make([]int64, h.N)
		for _, k := range t.res.hits {
			// In uint64: the buckets may span more than 292 years.
			if tm := b.Times[k]; tm >= h.Start {
				if i := (uint64(tm) - uint64(h.Start)) / uint64(h.Width); i < uint64(h.N) {
					t.res.buckets[i]++
				}
			}
		}
	}
	if e.q.Count {
		segment.PutBlock(b)
		t.res.hits = nil
		return
	}
	if !e.wantsContext() && len(t.res.hits) == 0 {
		// Nothing to deliver: the run only steps over the task, maybe
		// long after (a merge of many streams), so do not hold b.
		segment.PutBlock(b)
		return
	}
	if e.compact {
		var c *segment.Block
		if !e.wantsContext() {
			c = compactHits(b, t.res.hits)
		} else {
			// A block of the one stream (several go to doShared): its
			// entries in the time range are what the run walks.
			need := make([]bool, b.Len())
			ents := make([]int32, 0, b.Len())
			for k := range b.Len() {
				if timeOK || b.Times[k] >= e.q.Since && b.Times[k] <= e.last {
					ents = append(ents, int32(k))
				}
			}
			markContext(need, ents, t.res.hits, max(e.q.Before, e.q.After))
			c = contextCopy(b, need)
		}
		if c != nil {
			t.res.blk, t.res.own = c, true
			e.copied.Add(1)
			segment.PutBlock(b)
			return
		}
	}
	t.res.blk = b
}

// markContext marks in need the entries of one stream in a block whose
// lines a context walk (advanceCtx) may deliver or carry: ents are the
// stream's entries in the time range and hits its matches, both
// ascending. They are each hit and the m entries either side of it in
// ents (m = max(Before, After), which covers either order), and the first
// and last m of ents: the After context of a match in the stream's block
// before, and the Before context carried into the next.
func markContext(need []bool, ents, hits []int32, m int) {
	n := len(ents)
	for i := range min(m, n) {
		need[ents[i]] = true
		need[ents[n-1-i]] = true
	}
	j := 0
	for _, k := range hits {
		for j < n && ents[j] < k {
			j++
		}
		for x := max(0, j-m); x <= min(n-1, j+m); x++ {
			need[ents[x]] = true
		}
	}
}

// contextCopy returns a copy of b on the heap that keeps every entry's
// time, stream and place but the bytes of only the entries need marks (the
// others read as empty lines), so that entry indexes, and with them hits
// and the context walk's entries, stay valid; nil when it would keep more
// than half of b's bytes.
func contextCopy(b *segment.Block, need []bool) *segment.Block {
	n, na := 0, 0
	for k, x := range need {
		if x {
			n += int(b.Offsets[k+1] - b.Offsets[k])
			na += attrLen(b, k)
		}
	}
	if 2*(n+na) > len(b.Data)+len(b.AttrData) {
		return nil
	}
	c := &segment.Block{
		Data:    make([]byte, 0, n),
		Offsets: make([]uint32, len(need)+1),
		Times:   slices.Clone(b.Times),
		Streams: slices.Clone(b.Streams),
	}
	hasAttrs := len(b.AttrOffsets) > 0
	if hasAttrs {
		c.AttrData = make([]byte, 0, na)
		c.AttrOffsets = make([]uint32, len(need)+1)
	}
	for k, x := range need {
		if x {
			c.Data = append(c.Data, b.Line(k)...)
			if hasAttrs {
				c.AttrData = append(c.AttrData, b.Attrs(k)...)
			}
		}
		c.Offsets[k+1] = uint32(len(c.Data))
		if hasAttrs {
			c.AttrOffsets[k+1] = uint32(len(c.AttrData))
		}
	}
	return c
}

// attrLen is the length of entry k's metadata in b.
func attrLen(b *segment.Block, k int) int {
	if len(b.AttrOffsets) == 0 {
		return 0
	}
	return int(b.AttrOffsets[k+1] - b.AttrOffsets[k])
}

// copyOf returns an empty block on the heap for n entries of b whose
// lines take dataLen bytes and metadata metaLen, to be filled by
// appendCopy.
func copyOf(b *segment.Block, n, dataLen, metaLen int) *segment.Block {
	c := &segment.Block{
		Data:    make([]byte, 0, dataLen),
		Offsets: make([]uint32, 1, n+1),
		Times:   make([]int64, 0, n),
		Streams: make([]uint32, 0, n),
	}
	if len(b.AttrOffsets) > 0 && metaLen > 0 {
		// Else empty, as a decoded block's when no entry has metadata.
		c.AttrData = make([]byte, 0, metaLen)
		c.AttrOffsets = make([]uint32, 1, n+1)
	}
	return c
}

// appendCopy appends a copy of entry k of b (line, metadata, time and
// stream) to c, made by copyOf.
func appendCopy(c, b *segment.Block, k int) {
	c.Data = append(c.Data, b.Line(k)...)
	c.Offsets = append(c.Offsets, uint32(len(c.Data)))
	c.Times = append(c.Times, b.Times[k])
	c.Streams = append(c.Streams, b.Streams[k])
	if len(c.AttrOffsets) > 0 {
		c.AttrData = append(c.AttrData, b.Attrs(k)...)
		c.AttrOffsets = append(c.AttrOffsets, uint32(len(c.AttrData)))
	}
}

// compactHits returns a block of just the entries hits of b, on the heap
// and sized to them, and rewrites hits to index it (0, 1, ...); nil, with
// hits as they were, when there are none (nothing to hold: the runs let
// go of the block at once) or they are more than half of b's bytes. A merge of
// S streams holds each run's current block until the run moves past it;
// with a decoded block of a MiB or more each (in a 2 MiB arena), a store
// of many ingested files held ~2.3 MB a stream for a --limit 5 search
// (finding E6: 342 MB for 150 files of 1.1 MB), where the hits are a few
// lines.
func compactHits(b *segment.Block, hits []int32) *segment.Block {
	if len(hits) == 0 {
		return nil
	}
	n, na := 0, 0
	for _, k := range hits {
		n += int(b.Offsets[k+1] - b.Offsets[k])
		na += attrLen(b, int(k))
	}
	if 2*(n+na) > len(b.Data)+len(b.AttrData) {
		return nil
	}
	c := copyOf(b, len(hits), n, na)
	for i, k := range hits {
		appendCopy(c, b, int(k))
		hits[i] = int32(i)
	}
	return c
}

// doShared does a merge run's task on a block that holds several streams:
// every selected stream of the block has a run that reads it, mostly at
// about the same time, so the cache decodes and matches the block once
// for them all (blockCache.get) and the task takes its stream's share of
// the result in O(1). Matching the block once per stream instead costs
// O(streams × entries) a block (finding F1: 16 s for 10 lines of 20,000
// streams).
func (e *exec) doShared(t *task, m segment.BlockMeta, sc *scratch) {
	i, ok := slices.BinarySearch(m.Streams, uint32(t.stream))
	if !ok {
		return // cannot happen: the run's tasks are the blocks listing its stream
	}
	cb, held := e.cache.get(e, t, m, i, sc)
	if !held {
		return // no hit of the stream, and no block: nothing to deliver
	}
	if cb.err != nil {
		e.cache.put(t.part, t.block)
		t.res.err = cb.err
		return
	}
	t.res.blk, t.res.cached = cb.b, true
	t.res.hits = cb.hits.of(i)
	t.res.count = int64(len(t.res.hits))
	if cb.ents.start != nil {
		t.res.ents = cb.ents.of(i)
	}
}

// wantsContext reports whether context entries are delivered.
func (e *exec) wantsContext() bool {
	return !e.q.Count && (e.q.Before > 0 || e.q.After > 0 || e.q.Grouped)
}

// outOfRange reports whether block m holds no entry in the time range.
func (e *exec) outOfRange(m segment.BlockMeta) bool {
	return m.Entries == 0 || m.MaxTime < e.q.Since || m.MinTime > e.last
}

// whole reports whether all of block m is in the time range (timeOK) and
// holds only selected streams (allSel), so its entries need no such check.
func (e *exec) whole(m segment.BlockMeta) (timeOK, allSel bool) {
	timeOK = m.MinTime >= e.q.Since && m.MaxTime <= e.last
	allSel = true
	if e.sel != nil {
		for _, s := range m.Streams {
			allSel = allSel && e.sel[s]
		}
	}
	return timeOK, allSel
}

// match appends to hits the matching entries of b (of stream when >= 0),
// ascending. timeOK says the whole block is in the time range, allSel that
// it holds only selected streams.
// stages, if set, replaces Plan.MatchEntry (see Scanner.MatchStages).
func (e *exec) match(b *segment.Block, timeOK, allSel bool, stream int64, sc *scratch, hits []int32, stages func(int) bool) []int32 {
	f := filter{e: e, b: b, timeOK: timeOK, stream: stream, sel: stream < 0 && !allSel, stagesFn: stages}
	return e.scan(&f, sc, hits)
}

// filter decides whether a candidate entry of a block matches.
type filter struct {
	e       *exec
	b       *segment.Block
	timeOK  bool  // the whole block is in the time range
	stream  int64 // >= 0: only this stream
	sel     bool  // check e.sel
	ex      []int32
	xi      int  // candidates come ascending: next index into ex
	confirm bool // check checks, or the whole plan when e.stages
	checks  []*query.Filter
	// stagesFn, if set, decides instead of MatchEntry when e.stages.
	stagesFn func(k int) bool
}

func (f *filter) keep(k int) bool {
	b := f.b
	if !f.timeOK && (b.Times[k] < f.e.q.Since || b.Times[k] > f.e.last) {
		return false
	}
	if f.stream >= 0 {
		if int64(b.Streams[k]) != f.stream {
			return false
		}
	} else if f.sel && !f.e.sel[b.Streams[k]] {
		return false
	}
	if f.ex != nil {
		for f.xi < len(f.ex) && int(f.ex[f.xi]) < k {
			f.xi++
		}
		if f.xi < len(f.ex) && int(f.ex[f.xi]) == k {
			return false
		}
	}
	if !f.confirm {
		return true
	}
	line := b.Line(k)
	if f.e.stages {
		if f.stagesFn != nil {
			return f.stagesFn(k)
		}
		return f.e.q.Plan.MatchEntryAttrs(f.e.labels[b.Streams[k]], b.Attrs(k), line)
	}
	for _, c := range f.checks {
		if !c.Pass(line) {
			return false
		}
	}
	return true
}

// sampleBytes is how much of a block is sampled to choose the driver.
const sampleBytes = 32 << 10

// scan appends to hits the matching entries of f.b, ascending.
func (e *exec) scan(f *filter, sc *scratch, hits []int32) []int32 {
	if len(e.excl) > 0 {
		sc.x = append(sc.x[:0], anyOf(f.b, e.excl, sc)...)
		f.ex, f.xi = sc.x, 0
	}
	if len(e.drivers) == 0 {
		f.confirm, f.checks = e.confirm(nil), e.free
		for k := range f.b.Len() {
			if f.keep(k) {
				hits = append(hits, int32(k))
			}
		}
		return hits
	}
	d := &e.drivers[0]
	if len(e.drivers) > 1 {
		// The needles rarest in a sample of the block drive; a needle in
		// every line makes a poor driver however long it is.
		sample := f.b.Data[:min(len(f.b.Data), sampleBytes)]
		best := -1
		for i := range e.drivers {
			n := 0
			for _, s := range e.drivers[i].needles {
				n += s.Count(sample)
			}
			if best < 0 || n < best {
				d, best = &e.drivers[i], n
			}
		}
	}
	f.confirm, f.checks = e.confirm(d), d.checks
	if len(d.needles) == 1 {
		return ScanBlock(f.b, d.needles[0], f.keep, hits)
	}
	for _, k := range anyOf(f.b, d.needles, sc) {
		if f.keep(int(k)) {
			hits = append(hits, k)
		}
	}
	return hits
}

// anyOf returns the entries of b holding any of the needles, ascending:
// one pass per needle, merged (measured faster than testing each entry
// for every needle, see BenchmarkPlanBlock). The result aliases sc.
func anyOf(b *segment.Block, needles []*needle.Searcher, sc *scratch) []int32 {
	sc.a = ScanBlock(b, needles[0], nil, sc.a[:0])
	for _, s := range needles[1:] {
		sc.b = ScanBlock(b, s, nil, sc.b[:0])
		sc.c = union(sc.c[:0], sc.a, sc.b)
		sc.a, sc.c = sc.c, sc.a
	}
	return sc.a
}

// union appends the sorted union of ascending a and b to dst.
func union(dst, a, b []int32) []int32 {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			dst = append(dst, a[i])
			i++
		case a[i] > b[j]:
			dst = append(dst, b[j])
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}

// ScanBlock appends to hits the entries of b that contain the needle and
// that keep accepts (nil accepts all), ascending. The kernel runs over the
// block's whole Data buffer (see the package doc); an empty needle
// matches every entry.
func ScanBlock(b *segment.Block, s *needle.Searcher, keep func(int) bool, hits []int32) []int32 {
	n := len(b.Times)
	m := s.Len()
	if m == 0 {
		for k := range n {
			if keep == nil || keep(k) {
				hits = append(hits, int32(k))
			}
		}
		return hits
	}
	data, offs := b.Data, b.Offsets
	pos, k := 0, 0
	for pos < len(data) {
		i := s.IndexFrom(data, pos)
		if i < 0 {
			break
		}
		// The entry holding byte i: the first k with offs[k+1] > i.
		// Empty entries hold no byte and are passed over. Frequent
		// needles hit the next few entries: step there linearly, and
		// binary-search only a long jump.
		for step := 0; step < 8 && int(offs[k+1]) <= i; step++ {
			k++
		}
		if int(offs[k+1]) <= i {
			k += sort.Search(n-k, func(j int) bool { return int(offs[k+j+1]) > i })
		}
		end := int(offs[k+1])
		if i+m <= end && (keep == nil || keep(k)) {
			hits = append(hits, int32(k))
		}
		// Whether it matched, spanned into the next entry or was filtered
		// out, nothing more in entry k matters.
		pos = end
		k++
	}
	return hits
}

// run is one ordered sequence of tasks being executed.
type run struct {
	pending chan *task
	cur     *task
	hit     int // index into cur.res.hits
	order   int // tie-break in merges: lower first (Oldest)
	stream  int64
	e       *exec
	m       Match
	cx      *ctxState // nil without context

	// Time order (Oldest, Newest without context; see timeOrder). After
	// taken tasks, no entry of the rest is before (Newest: after)
	// bound[taken], nor, at that time, before (after) the entry at
	// position edge[taken].
	byTime      bool
	bound, edge []int64
	taken       int
	cs          cursorHeap // the blocks taken and not yet delivered
	fast        bool       // every hit left in the top cursor is ready and first
	cut         bool       // with a limit: its cursors are in exec.tails (trim)
}

// start begins dispatching tasks with at most window in flight (dispatched
// and not yet consumed), returning the run that delivers them in order.
// Without context and unless counting, it first sorts tasks by time
// bound (timeOrder).
func (e *exec) start(ctx context.Context, wg *sync.WaitGroup, tasks []task, window int, stream int64) *run {
	r := &run{pending: make(chan *task, window), e: e, stream: stream, order: int(stream)}
	r.cs.rev = e.rev
	if !e.q.Count && (e.q.Before > 0 || e.q.After > 0 || e.q.Grouped) {
		r.cx = &ctxState{before: e.q.Before, after: e.q.After, lastOut: math.MinInt64}
		if e.rev {
			r.cx.before, r.cx.after = r.cx.after, r.cx.before
		}
	} else if !e.q.Count && e.q.Order != Stored {
		r.byTime = true
		r.bound, r.edge = e.timeOrder(tasks)
		if e.q.Limit > 0 {
			r.cut = true
			e.tails.rev, e.tails.tail = e.rev, true
		}
	}
	wg.Go(func() {
		defer close(r.pending)
		for i := range tasks {
			t := &tasks[i]
			t.done = make(chan struct{})
			// pending's capacity is the window: this blocks until the
			// consumer has taken an earlier task.
			select {
			case r.pending <- t:
			case <-ctx.Done():
				return
			}
			select {
			case e.work <- t:
			case <-ctx.Done():
				return
			}
		}
	})
	return r
}

// next waits for the next task's result in order; nil at the end.
func (r *run) next(ctx context.Context) (*task, error) {
	var t *task
	select {
	case t = <-r.pending:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if t == nil {
		return nil, ctx.Err() // closed: the end, or cancelled
	}
	select {
	case <-t.done:
		return t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain sums a counting run.
func (e *exec) drain(ctx context.Context, r *run, onErr func(error)) (int64, error) {
	var n int64
	limit := e.q.Limit
	for {
		t, err := r.next(ctx)
		if err != nil || t == nil {
			return n, err
		}
		if t.res.err != nil {
			onErr(t.res.err)
			continue
		}
		n += t.res.count
		if limit > 0 && n >= limit {
			return limit, nil
		}
	}
}

// merge delivers the runs' entries merged by time (one run: in order).
func (e *exec) merge(ctx context.Context, runs []*run, emit func(*Match) error, onErr func(error)) (int64, error) {
	h := &runHeap{rev: e.rev}
	for _, r := range runs {
		ok, err := r.advance(ctx, onErr)
		if err != nil {
			return 0, err
		}
		if ok {
			h.rs = append(h.rs, r)
		}
	}
	heap.Init(h)
	var n int64
	for h.Len() > 0 {
		r := h.rs[0]
		if err := emit(&r.m); err != nil {
			return n, err
		}
		if !r.m.Context {
			n++
			e.emitted = n
			if e.q.Limit > 0 && n >= e.q.Limit {
				return n, r.trail(ctx, emit, onErr)
			}
		}
		ok, err := r.advance(ctx, onErr)
		if err != nil {
			return n, err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return n, nil
}

// trail delivers the After context of the run's last match, once the limit
// is reached: the next entries of its stream, matching or not.
func (r *run) trail(ctx context.Context, emit func(*Match) error, onErr func(error)) error {
	if r.cx == nil {
		return nil
	}
	r.cx.trailing = true
	for {
		ok, err := r.advance(ctx, onErr)
		if err != nil || !ok {
			return err
		}
		if err := emit(&r.m); err != nil {
			return err
		}
	}
}

// timeOrder sorts a run's tasks (stably) by the earliest time each can
// deliver, its block's MinTime clipped to the time range (Newest: by the
// latest, MaxTime, descending), and returns per task that bound and the
// edge of the tasks from it on: the smallest position of their first
// entries (Newest: the largest of their last). When every stream's times
// ascend the sort changes nothing: blocks are already in that order.
func (e *exec) timeOrder(tasks []task) (bound, edge []int64) {
	bound = make([]int64, len(tasks))
	for i := range tasks {
		m := e.parts[tasks[i].part].BlockMeta(tasks[i].block)
		bound[i] = max(m.MinTime, e.q.Since)
		if e.rev {
			bound[i] = min(m.MaxTime, e.last)
		}
	}
	cmpBound := func(a, b int64) int {
		if e.rev {
			return cmp.Compare(b, a)
		}
		return cmp.Compare(a, b)
	}
	if !slices.IsSortedFunc(bound, cmpBound) {
		idx := make([]int, len(tasks))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmpBound(bound[a], bound[b]) })
		ts, bs := slices.Clone(tasks), slices.Clone(bound)
		for i, j := range idx {
			tasks[i], bound[i] = ts[j], bs[j]
		}
	}
	edge = make([]int64, len(tasks))
	for i := len(tasks) - 1; i >= 0; i-- {
		m := e.parts[tasks[i].part].BlockMeta(tasks[i].block)
		if e.rev {
			edge[i] = tasks[i].ord + int64(m.Entries) - 1
			if i+1 < len(tasks) {
				edge[i] = max(edge[i], edge[i+1])
			}
		} else {
			edge[i] = tasks[i].ord
			if i+1 < len(tasks) {
				edge[i] = min(edge[i], edge[i+1])
			}
		}
	}
	return bound, edge
}

// advance moves the run to its next entry; false at the end.
func (r *run) advance(ctx context.Context, onErr func(error)) (bool, error) {
	if r.cx != nil {
		return r.advanceCtx(ctx, onErr)
	}
	if r.byTime {
		return r.advanceByTime(ctx, onErr)
	}
	if r.cur != nil {
		if r.e.rev {
			r.hit--
		} else {
			r.hit++
		}
		if r.hit >= 0 && r.hit < len(r.cur.res.hits) {
			r.fill()
			return true, nil
		}
		r.release()
	}
	t, err := r.take(ctx, onErr)
	if err != nil || t == nil {
		return false, err
	}
	r.cur, r.hit = t, 0
	if r.e.rev {
		r.hit = len(t.res.hits) - 1
	}
	r.fill()
	return true, nil
}

// maxHeld is how many decoded blocks a time-ordered run holds at most
// while their time ranges overlap; past it, the hits left in one are
// copied out and the block given back (cursor.detach).
const maxHeld = 4

// advanceByTime is advance in time order: a run delivers its entries by
// (time, position in the store), backwards for Newest, whatever order
// they were stored in.
//
// Its blocks come sorted by time bound (timeOrder), and a block's hits
// are sorted by time when one pass finds them out of order. The blocks
// taken and not finished are cursors in a heap, the one whose next entry
// comes first on top. That entry is delivered when no block still to
// come can hold an earlier one (ready, from the next block's bound and
// edge: the block index alone); else the next block is taken first. When
// each stream's times ascend, a run of one stream delivers every entry
// at once and holds one block, as in store order; one whose blocks hold
// other streams too (their MinTime may be below its entries) holds two
// where consecutive blocks overlap. Disorder costs only where it is, and
// the limit stays exact. With a limit, each block taken lets the runs
// drop the hits they hold that can no longer be delivered (exec.trim),
// so what they hold, copies included, is bounded by the limit.
func (r *run) advanceByTime(ctx context.Context, onErr func(error)) (bool, error) {
	e := r.e
	if r.cur != nil {
		// Step past the entry delivered last: the top cursor's.
		c := r.cs.h[0]
		if r.cut {
			e.live--
			if c.bytes > 0 {
				e.copyLive -= c.hitBytes(c.k())
			}
		}
		if c.step(e.rev) {
			if r.fast {
				r.deliver(c)
				return true, nil
			}
			r.cs.down(0)
		} else {
			r.drop(c)
			r.fast = false
		}
		r.cur = nil
	}
	for {
		if len(r.cs.h) > 0 {
			c := r.cs.h[0]
			if tm, pos := c.at(); r.ready(tm, pos) {
				// The usual case: its last hit is ready too and comes
				// before the other blocks' next ones (the smaller child
				// of the root holds the first of those). Then so does
				// every hit it has left, and no block is taken before it
				// ends: deliver them without asking again, as fast as
				// store order.
				tl, pl := c.last(e.rev)
				r.fast = r.ready(tl, pl)
				for i := 1; i <= 2 && i < len(r.cs.h) && r.fast; i++ {
					tm, pos := r.cs.h[i].at()
					r.fast = r.cs.before(tl, pl, tm, pos)
				}
				r.deliver(c)
				return true, nil
			}
		}
		if r.taken >= len(r.bound) || r.pastCut() {
			// The end: every entry at hand would be ready, so there is
			// none (the last ones delivered, or dropped by trim); or
			// the blocks left hold only entries past the limit.
			return false, nil
		}
		// A block still to come may hold an entry before the first one at
		// hand (or there is none): take it.
		t, err := r.take(ctx, onErr)
		if err != nil {
			return false, err
		}
		if t == nil {
			continue
		}
		c := newCursor(t, e.rev)
		c.r = r
		if t.res.own {
			// compactHits' copy of the run's hits: held as detach's.
			c.bytes = int64(len(t.res.blk.Data)+len(t.res.blk.AttrData)) + 20*int64(t.res.blk.Len())
			e.copyBytes += c.bytes
			e.peakCopy = max(e.peakCopy, e.copyBytes)
			if r.cut {
				e.copyLive += c.bytes
			}
		}
		r.cs.push(c)
		if r.cut {
			e.tails.push(c)
			e.live += int64(c.left(e.rev))
			e.trim()
		}
		if r.cs.held() > maxHeld {
			r.cs.detachOne(e)
		}
	}
}

// trim drops the hits held by the runs of a limited time-ordered search
// that it can no longer deliver. The merge delivers the runs' entries in
// one order (time, stream, position; Newest reversed), at most
// Limit-emitted more of them, so an entry that many undelivered entries
// held by the runs come before is never delivered, whatever the blocks
// not yet taken hold. While the runs' cursors hold more hits than that,
// the last of them in delivery order goes: the last hit of tails' top
// cursor (a cursor's hits are in delivery order). A cursor left empty
// gives its block back. A run's current entry, which the merge holds
// (run.m), stays: were it past the limit the merge would not deliver it,
// but its line must not point into a block given back.
//
// Copies keep the bytes of the hits they lost (dropped, or delivered
// from their front) until they are copied again. When that waste passes
// the bytes of their live hits (and compactSlack), the copies with more
// waste than live hits are copied again, smaller: copies then hold at
// most about twice the bytes of the hits the limit can still deliver,
// whatever the store (they held every hit of it where each block began
// long before its other entries: review 8, F1). Copying again only
// then, not each copy at half its hits, keeps a copy that loses all its
// hits one by one (Newest over such a store) from being copied log n
// times: a third less time there (BenchmarkRunOrderLimitCopies).
func (e *exec) trim() {
	budget := e.q.Limit - e.emitted
	var kept []*cursor // current entries that would go, set aside
	for e.live-int64(len(kept)) > budget && len(e.tails.h) > 0 {
		c := e.tails.h[0]
		n := c.left(e.rev)
		if n == 1 && c.hi == 0 && c.r.cur != nil {
			e.tails.remove(0)
			kept = append(kept, c)
			continue
		}
		if k := c.lastKey(); !e.cutSet || e.after(e.cut, k) {
			e.cut, e.cutSet = k, true
		}
		if c.bytes > 0 {
			e.copyLive -= c.hitBytes(c.lastHit(e.rev))
		}
		c.dropLast(e.rev)
		e.live--
		if n == 1 {
			c.r.drop(c)
			continue
		}
		e.tails.down(0)
	}
	for _, c := range kept {
		e.tails.push(c)
	}
	if e.copyBytes > 2*e.copyLive+compactSlack {
		for _, c := range e.tails.h {
			if c.bytes > 0 && 2*c.liveBytes(e.rev) < c.bytes {
				// The keys of its hits, and with them its places in
				// both heaps, stay; a current entry's line stays valid
				// too, as the old copy is on the heap, not pooled.
				c.detach(e, e.rev)
			}
		}
	}
}

// compactSlack is the waste in copies that trim lets be before copying
// them again: it spares copying again and again for a few bytes.
const compactSlack = 4 << 10

// hitKey places an entry in the merge's delivery order: by time, then
// stream (run.order), then position in the store; Newest reversed.
type hitKey struct {
	time  int64
	order int
	pos   int64
}

// after reports whether a is delivered after b.
func (e *exec) after(a, b hitKey) bool {
	if e.rev {
		a, b = b, a
	}
	return a.time > b.time || a.time == b.time && (a.order > b.order || a.order == b.order && a.pos > b.pos)
}

// pastCut reports whether the blocks the run has still to take hold only
// entries past the limit: none before e.cut (trim). Their entries come
// no earlier than the next one's time bound and the edge of their
// positions. Then the run need not take them: what it holds is ready,
// and once it is delivered the run ends. Without this, a run whose hits
// trim dropped would read on to find one it may deliver, to the end of
// the store.
func (r *run) pastCut() bool {
	e := r.e
	if !r.cut || !e.cutSet || r.taken >= len(r.bound) {
		return false
	}
	first := hitKey{r.bound[r.taken], r.order, r.edge[r.taken]}
	return !e.after(e.cut, first)
}

// deliver makes the cursor's next hit the run's current entry.
func (r *run) deliver(c *cursor) {
	b, k := c.t.res.blk, int(c.k())
	r.cur = c.t
	r.m = Match{Time: b.Times[k], Stream: b.Streams[k], Line: b.Line(k), Attrs: b.Attrs(k)}
}

// drop removes cursor c, which has no hit left, from the run (and from
// the search's tails) and gives its block back.
func (r *run) drop(c *cursor) {
	r.cs.remove(c.hi)
	if c.ti >= 0 {
		r.e.tails.remove(c.ti)
	}
	r.e.copyBytes -= c.bytes
	r.e.releaseBlock(c.t)
}

// ready reports whether the entry at time tm and position pos comes
// before any entry of the tasks not yet taken.
func (r *run) ready(tm, pos int64) bool {
	if r.taken >= len(r.bound) || r.cut && r.pastCut() {
		return true
	}
	b, edge := r.bound[r.taken], r.edge[r.taken]
	if r.e.rev {
		return tm > b || tm == b && pos > edge
	}
	return tm < b || tm == b && pos < edge
}

// take returns the run's next task that has hits (blocks without any
// are given back); nil at the end.
func (r *run) take(ctx context.Context, onErr func(error)) (*task, error) {
	for {
		t, err := r.next(ctx)
		if err != nil || t == nil {
			r.taken = len(r.bound) // the end: every entry at hand is ready
			return nil, err
		}
		r.taken++
		if t.res.err != nil {
			// In a merge several runs may read the same damaged block;
			// each reports it. Rare enough not to deduplicate.
			onErr(t.res.err)
			continue
		}
		if len(t.res.hits) == 0 {
			r.e.releaseBlock(t)
			continue
		}
		return t, nil
	}
}

// cursor walks a taken block's hits in time order.
type cursor struct {
	t    *task
	hits []int32 // t.res.hits, or a copy sorted by (time, index) when they are not
	i    int     // the next hit, counting from the end for Newest
	r    *run    // the run holding it
	// hi and ti are its places in r.cs and in exec.tails (-1: not in).
	hi, ti int
	bytes  int64 // the size of its copy (detach, compactHits), 0 for a decoded block
}

func newCursor(t *task, rev bool) *cursor {
	c := &cursor{t: t, hits: t.res.hits, hi: -1, ti: -1}
	times := t.res.blk.Times
	for i := 1; i < len(c.hits); i++ {
		if times[c.hits[i]] < times[c.hits[i-1]] {
			// Sort a copy: a shared block's hits belong to the cache.
			c.hits = slices.Clone(c.hits)
			slices.SortStableFunc(c.hits, func(a, b int32) int { return cmp.Compare(times[a], times[b]) })
			break
		}
	}
	if rev {
		c.i = len(c.hits) - 1
	}
	return c
}

// k is the block entry of the cursor's next hit.
func (c *cursor) k() int32 { return c.hits[c.i] }

// at is the time and store position of the cursor's next hit.
func (c *cursor) at() (int64, int64) {
	k := c.k()
	return c.t.res.blk.Times[k], c.t.ord + int64(k)
}

// last is the time and store position of the cursor's last hit in
// delivery order.
func (c *cursor) last(rev bool) (int64, int64) {
	k := c.lastHit(rev)
	return c.t.res.blk.Times[k], c.t.ord + int64(k)
}

// lastHit is the block entry of the cursor's last hit in delivery order.
func (c *cursor) lastHit(rev bool) int32 {
	if rev {
		return c.hits[0]
	}
	return c.hits[len(c.hits)-1]
}

// hitBytes is what a copy spends on block entry k: its line and
// metadata, and 20 bytes for its time, stream, offset and hit index.
func (c *cursor) hitBytes(k int32) int64 {
	b := c.t.res.blk
	return int64(b.Offsets[k+1]-b.Offsets[k]) + int64(attrLen(b, int(k))) + 20
}

// liveBytes is what a copy spends on the hits it has left.
func (c *cursor) liveBytes(rev bool) int64 {
	left := c.hits[c.i:]
	if rev {
		left = c.hits[:c.i+1]
	}
	var n int64
	for _, k := range left {
		n += c.hitBytes(k)
	}
	return n
}

// lastKey is the merge's key of the cursor's last hit.
func (c *cursor) lastKey() hitKey {
	tm, pos := c.last(c.r.e.rev)
	return hitKey{tm, c.r.order, pos}
}

// left is the number of hits left, the next one included.
func (c *cursor) left(rev bool) int {
	if rev {
		return c.i + 1
	}
	return len(c.hits) - c.i
}

// step moves to the next hit; false when there is none.
func (c *cursor) step(rev bool) bool {
	if rev {
		c.i--
		return c.i >= 0
	}
	c.i++
	return c.i < len(c.hits)
}

// dropLast drops the last hit in delivery order (trim drops a cursor
// left with none). It only reslices: the hits may be the cache's.
func (c *cursor) dropLast(rev bool) {
	if rev {
		c.hits = c.hits[1:]
		c.i--
	} else {
		c.hits = c.hits[:len(c.hits)-1]
	}
}

// detach copies the hits left into a block of their own and gives the
// decoded one back. The copy holds them in delivery order, ascending, so
// their indexes keep their order, and stay within the block's positions
// (t.ord onwards), which is all that positions are compared for.
func (c *cursor) detach(e *exec, rev bool) {
	left := c.hits[c.i:]
	if rev {
		left = c.hits[:c.i+1]
	}
	b := c.t.res.blk
	n, na := 0, 0
	for _, k := range left {
		n += int(b.Offsets[k+1] - b.Offsets[k])
		na += attrLen(b, int(k))
	}
	cp := copyOf(b, len(left), n, na)
	hits := make([]int32, len(left))
	for i, k := range left {
		appendCopy(cp, b, int(k))
		hits[i] = int32(i)
	}
	size := int64(n+na) + 20*int64(len(left))
	if c.bytes == 0 && c.r.cut {
		e.copyLive += size // else they were live in the old copy
	}
	e.copyBytes += size - c.bytes
	e.peakCopy = max(e.peakCopy, e.copyBytes)
	c.bytes = size
	ord := c.t.ord
	e.releaseBlock(c.t)
	c.t = &task{ord: ord, res: result{blk: cp, own: true, hits: hits}}
	c.hits, c.i = hits, 0
	if rev {
		c.i = len(hits) - 1
	}
}

// cursorHeap holds a run's cursors, the one to deliver first on top
// (by next hit); or, as exec.tails, the cursors of all runs, the one
// whose last hit is delivered last on top. Each cursor knows its place
// in both (cursor.hi, cursor.ti), so that trim can take one out.
type cursorHeap struct {
	h    []*cursor
	rev  bool
	tail bool // exec.tails
}

// held counts the cursors holding a decoded block (not a copy).
func (h *cursorHeap) held() int {
	n := 0
	for _, c := range h.h {
		if !c.t.res.own {
			n++
		}
	}
	return n
}

// detachOne detaches the cursor holding a decoded block with the fewest
// hits left: the cheapest copy.
func (h *cursorHeap) detachOne(e *exec) {
	best, left := -1, 0
	for i, c := range h.h {
		n := c.left(h.rev)
		if !c.t.res.own && (best < 0 || n < left) {
			best, left = i, n
		}
	}
	if best >= 0 {
		h.h[best].detach(e, h.rev) // its next hit is unchanged: the heap holds
	}
}

func (h *cursorHeap) less(i, j int) bool {
	if h.tail {
		// i's last hit is delivered after j's, across runs.
		a, b := h.h[i], h.h[j]
		return a.r.e.after(a.lastKey(), b.lastKey())
	}
	ti, pi := h.h[i].at()
	tj, pj := h.h[j].at()
	return h.before(ti, pi, tj, pj)
}

// before reports whether the entry at (ti, pi) is delivered before the
// one at (tj, pj).
func (h *cursorHeap) before(ti, pi, tj, pj int64) bool {
	if h.rev {
		return ti > tj || ti == tj && pi > pj
	}
	return ti < tj || ti == tj && pi < pj
}

// place is where c records its index in h.
func (h *cursorHeap) place(c *cursor) *int {
	if h.tail {
		return &c.ti
	}
	return &c.hi
}

func (h *cursorHeap) swap(i, j int) {
	h.h[i], h.h[j] = h.h[j], h.h[i]
	*h.place(h.h[i]) = i
	*h.place(h.h[j]) = j
}

func (h *cursorHeap) push(c *cursor) {
	h.h = append(h.h, c)
	*h.place(c) = len(h.h) - 1
	h.up(len(h.h) - 1)
}

// remove takes out the cursor at index i.
func (h *cursorHeap) remove(i int) {
	c, n := h.h[i], len(h.h)-1
	if i != n {
		h.swap(i, n)
	}
	h.h[n] = nil
	h.h = h.h[:n]
	*h.place(c) = -1
	if i < n {
		h.down(i)
		h.up(i)
	}
}

func (h *cursorHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *cursorHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h.h) {
			return
		}
		if c+1 < len(h.h) && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

func (r *run) release() {
	r.e.releaseBlock(r.cur)
	r.cur = nil
}

// releaseBlock gives back a task's decoded block.
func (e *exec) releaseBlock(t *task) {
	if t.res.cached {
		e.cache.put(t.part, t.block)
	} else if !t.res.own {
		segment.PutBlock(t.res.blk)
	}
	t.res = result{}
}

// blockCache shares decoded blocks among the stream runs of a merge: a
// block holding S selected streams is wanted by S runs, which the merge
// keeps at about the same point in time. The first run to want a block
// decodes it and matches it once for every selected stream, the hits
// grouped by stream, so that each run takes its own in O(its hits).
//
// A block is let go when the last run holding it does. If runs that will
// want it have not come yet (users), it is kept within a budget: decoded
// if room allows, else only its match results (4 bytes a hit and a
// stream). A run whose stream has no hit in a kept block, and wants no
// context, then needs nothing more; one that has hits takes the block, or
// decodes it again without matching it. This matters for a selective
// query: most runs have no hit in a block and let go of it at once, and
// the merge, which must know every run's first entry, walks each run in
// turn through its blocks up to its first hit; without the budget each of
// them decoded and matched the block again. Past the budget (or when no
// run is left to come) a block is freed, so memory stays bounded: the
// blocks the runs hold, as without the cache, plus the budget.
type blockCache struct {
	mu   sync.Mutex
	m    map[blockKey]*cachedBlock
	kept int // bytes of the blocks kept with refs 0
	// budget bounds kept: as much as 2×workers default-sized blocks, the
	// decoded bytes a search without merging holds.
	budget int
}

type blockKey struct{ part, block int }

// cachedBlock is a shared block: decoded (b or err set) while refs > 0;
// when refs is 0, kept decoded, or kept light (b nil, only the match
// results). Only the getter that decodes it sets b, err, hits and ents,
// before closing ready; hits and ents do not change after that, b and err
// only when refs is 0 (freed, or decoded again), all under mu or by that
// getter.
type cachedBlock struct {
	b     *segment.Block
	err   error
	refs  int
	users int           // runs whose task for the block has not called get yet
	own   bool          // b is a heap copy of the hits (compactHits), not pooled
	kept  int           // bytes counted in blockCache.kept (refs is 0)
	ready chan struct{} // closed once the fields below are set
	// hits are the block's matches of every selected stream, and ents,
	// when context is asked for, its entries in the time range (for
	// ctxState.load), both grouped by the block's streams.
	hits, ents buckets
}

// size is the memory of the match results.
func (cb *cachedBlock) size() int {
	return 4 * (len(cb.hits.idx) + len(cb.hits.start) + len(cb.ents.idx) + len(cb.ents.start))
}

// blockBytes is about the memory of a decoded block.
func blockBytes(b *segment.Block) int {
	return len(b.Data) + len(b.AttrData) + 16*b.Len()
}

// buckets are entry indexes grouped by stream: the entries of the i-th
// stream of a block's (sorted) stream list are idx[start[i]:start[i+1]],
// ascending.
type buckets struct {
	idx, start []int32
}

// of returns bucket i, capped so that an append cannot clobber the next.
func (g *buckets) of(i int) []int32 {
	lo, hi := g.start[i], g.start[i+1]
	return g.idx[lo:hi:hi]
}

// group sorts ks, ascending entries of b, into buckets by stream, streams
// being the block's stream list (sorted): a counting sort, which is
// stable, so each bucket stays ascending. An entry of a stream the list
// lacks (the decoder refuses such blocks) falls in no bucket.
func group(b *segment.Block, streams []uint32, ks []int32, sc *scratch) buckets {
	slot := slices.Grow(sc.slot[:0], len(ks))[:len(ks)]
	start := make([]int32, len(streams)+1)
	j, prev := -1, uint32(0)
	for i, k := range ks {
		// Entries come in runs of one stream: search only on a change.
		if s := b.Streams[k]; i == 0 || s != prev {
			prev, j = s, -1
			if x, ok := slices.BinarySearch(streams, s); ok {
				j = x
			}
		}
		slot[i] = int32(j)
		if j >= 0 {
			start[j+1]++
		}
	}
	for i := range streams {
		start[i+1] += start[i]
	}
	next := append(sc.next[:0], start[:len(streams)]...)
	idx := make([]int32, start[len(streams)])
	for i, k := range ks {
		if j := slot[i]; j >= 0 {
			idx[next[j]] = k
			next[j]++
		}
	}
	sc.slot, sc.next = slot, next
	return buckets{idx: idx, start: start}
}

// get returns task t's block (whose index entry is m) decoded and
// matched, doing what no earlier run left done; si is the index of the
// task's stream in m.Streams. held is false when the stream has nothing
// in a kept block (no hit, and no context wanted): then only cb's match
// results may be read, and no put follows. Otherwise each get, failed or
// not, must be matched by a put.
func (c *blockCache) get(e *exec, t *task, m segment.BlockMeta, si int, sc *scratch) (cb *cachedBlock, held bool) {
	k := blockKey{t.part, t.block}
	c.mu.Lock()
	cb, ok := c.m[k]
	if !ok {
		cb = &cachedBlock{users: t.users, ready: make(chan struct{})}
		c.m[k] = cb
	}
	cb.users--
	if ok && cb.refs > 0 {
		// Decoded, or being decoded by another run.
		cb.refs++
		c.mu.Unlock()
		<-cb.ready
		return cb, true
	}
	if ok && !e.wantsContext() && cb.hits.start[si] == cb.hits.start[si+1] {
		// Kept, and nothing of it is this run's.
		if cb.users == 0 {
			c.unkeep(cb)
			cb.free()
			delete(c.m, k)
		}
		c.mu.Unlock()
		return cb, false
	}
	cb.refs = 1
	if ok {
		c.unkeep(cb)
		if cb.b != nil {
			c.mu.Unlock()
			return cb, true // kept decoded
		}
		// Light: decode it again for this run (and those that come
		// while it is held); its match results stand.
		cb.ready = make(chan struct{})
	}
	c.mu.Unlock()
	defer close(cb.ready)
	b := segment.GetBlock()
	e.decoded.Add(1)
	if err := e.readBlock(e.parts[t.part], t.block, b); err != nil {
		segment.PutBlock(b)
		cb.err = err
		return cb, true
	}
	cb.b = b
	if ok {
		return cb, true
	}
	// One scan for every stream (-1); the filter checks the selection.
	timeOK, allSel := e.whole(m)
	sc.ks = e.match(b, timeOK, allSel, -1, sc, sc.ks[:0], nil)
	if e.compact && !e.wantsContext() {
		if c := compactHits(b, sc.ks); c != nil {
			e.copied.Add(1)
			segment.PutBlock(b)
			b, cb.b, cb.own = c, c, true
		}
	}
	cb.hits = group(b, m.Streams, sc.ks, sc)
	if e.wantsContext() {
		sc.ks = sc.ks[:0]
		for k := range b.Len() {
			if timeOK || b.Times[k] >= e.q.Since && b.Times[k] <= e.last {
				sc.ks = append(sc.ks, int32(k))
			}
		}
		cb.ents = group(b, m.Streams, sc.ks, sc)
		if e.compact {
			need := make([]bool, b.Len())
			for i := range m.Streams {
				markContext(need, cb.ents.of(i), cb.hits.of(i), max(e.q.Before, e.q.After))
			}
			if c := contextCopy(b, need); c != nil {
				e.copied.Add(1)
				segment.PutBlock(b)
				cb.b, cb.own = c, true
			}
		}
	}
	return cb, true
}

// put lets go of a block got with held true. The last holder keeps it,
// decoded or light, for the runs still to come if the budget allows, or
// frees it.
func (c *blockCache) put(part, block int) {
	k := blockKey{part, block}
	c.mu.Lock()
	defer c.mu.Unlock()
	cb := c.m[k]
	if cb.refs--; cb.refs > 0 {
		return
	}
	if cb.err != nil || cb.users == 0 {
		// A damaged block is read again by each later run, which
		// reports it, as without the cache.
		cb.free()
		delete(c.m, k)
		return
	}
	if n := cb.size() + blockBytes(cb.b); c.kept+n <= c.budget {
		cb.kept = n
		c.kept += n
		return
	}
	if cb.own {
		// Its hits index the copy, which a light entry could not decode
		// again: forget it; a run still to come decodes and matches the
		// block afresh.
		delete(c.m, k)
		return
	}
	cb.free()
	if n := cb.size(); c.kept+n <= c.budget {
		cb.kept = n
		c.kept += n
		return
	}
	delete(c.m, k)
}

// free gives back cb's decoded block, unless it is a heap copy.
func (cb *cachedBlock) free() {
	if !cb.own {
		segment.PutBlock(cb.b)
	}
	cb.b = nil
}

// unkeep takes a kept block out of the budget; c.mu is held.
func (c *blockCache) unkeep(cb *cachedBlock) {
	c.kept -= cb.kept
	cb.kept = 0
}

func (r *run) fill() {
	b, k := r.cur.res.blk, int(r.cur.res.hits[r.hit])
	r.m = Match{Time: b.Times[k], Stream: b.Streams[k], Line: b.Line(k), Attrs: b.Attrs(k)}
}

// ctxState walks a run's stream entry by entry to deliver context. Its
// sequence numbers count the stream's entries (in the time range) in
// iteration order; before and after are in iteration order too (swapped
// for Newest).
type ctxState struct {
	before, after int
	ents          []int32 // the current block's entries of the stream, in iteration order
	j             int     // next index into ents
	hits          []int32 // the current block's matches, ascending
	hp            int     // next hit to reach, in iteration order
	base          int64   // sequence number of ents[0]
	seq           int64   // sequence number of ents[j-1]; the first entry is 1
	lastOut       int64   // sequence number of the last delivered entry
	floor         int64   // first sequence number after the last gap (markGaps)
	afterLeft     int     // After context still owed
	trailing      bool    // limit reached: only the After context is left
	carry         []carried
	spare         []carried
	queue         []Match
	qi            int
}

// carried is a copy of an entry of an earlier block, for Before context.
type carried struct {
	seq   int64
	m     Match
	line  []byte
	attrs []byte
}

func (r *run) advanceCtx(ctx context.Context, onErr func(error)) (bool, error) {
	c := r.cx
	for {
		if c.qi < len(c.queue) {
			r.m = c.queue[c.qi]
			c.qi++
			return true, nil
		}
		c.queue, c.qi = c.queue[:0], 0
		if c.trailing && c.afterLeft == 0 {
			return false, nil
		}
		if r.cur == nil || c.j >= len(c.ents) {
			if r.cur != nil {
				c.saveCarry(r.cur.res.blk)
				r.release()
			}
			t, err := r.next(ctx)
			if err != nil || t == nil {
				return false, err
			}
			if t.res.err != nil {
				onErr(t.res.err)
				continue
			}
			r.cur = t
			c.load(r, t)
			continue
		}
		b := r.cur.res.blk
		k := c.ents[c.j]
		c.j++
		c.seq++
		if !c.trailing && c.isHit(k, r.e.rev) {
			for x := max(c.seq-int64(c.before), c.lastOut+1, c.floor, 1); x < c.seq; x++ {
				if x >= c.base {
					c.push(x, entryMatch(b, int(c.ents[x-c.base]), true))
				} else {
					c.push(x, c.carry[x-c.carry[0].seq].m)
				}
			}
			c.push(c.seq, entryMatch(b, int(k), false))
			c.afterLeft = c.after
			continue
		}
		if c.afterLeft > 0 {
			c.afterLeft--
			c.push(c.seq, entryMatch(b, int(k), true))
		}
	}
}

func entryMatch(b *segment.Block, k int, context bool) Match {
	return Match{Time: b.Times[k], Stream: b.Streams[k], Line: b.Line(k), Attrs: b.Attrs(k), Context: context}
}

func (c *ctxState) push(seq int64, m Match) {
	m.GroupStart = seq != c.lastOut+1
	c.lastOut = seq
	c.queue = append(c.queue, m)
}

// load starts on a task's block: the entries of the run's stream in the
// time range, in iteration order.
func (c *ctxState) load(r *run, t *task) {
	e, b := r.e, t.res.blk
	c.ents = c.ents[:0]
	if t.res.cached {
		// The cache grouped the block's entries by stream once for all
		// the runs: copy this stream's (they are reversed below), rather
		// than each run scanning the whole block.
		c.ents = append(c.ents, t.res.ents...)
	} else {
		for k := range b.Len() {
			if b.Times[k] < e.q.Since || b.Times[k] > e.last {
				continue
			}
			s := b.Streams[k]
			if r.stream >= 0 && int64(s) != r.stream || r.stream < 0 && e.sel != nil && !e.sel[s] {
				continue
			}
			c.ents = append(c.ents, int32(k))
		}
	}
	if t.gap {
		// Blocks of the stream were skipped before this one: no Before
		// context reaches back across them, and what follows starts a
		// new group (the skipped entries were not printed).
		c.carry = c.carry[:0]
		c.afterLeft = 0
		c.seq++
		c.floor = c.seq + 1
	}
	c.hits = t.res.hits
	c.hp = 0
	if e.rev {
		slices.Reverse(c.ents)
		c.hp = len(c.hits) - 1
	}
	c.j = 0
	c.base = c.seq + 1
}

// isHit reports whether entry k, the next in iteration order, matched.
func (c *ctxState) isHit(k int32, rev bool) bool {
	if rev {
		for c.hp >= 0 && c.hits[c.hp] > k {
			c.hp--
		}
		return c.hp >= 0 && c.hits[c.hp] == k
	}
	for c.hp < len(c.hits) && c.hits[c.hp] < k {
		c.hp++
	}
	return c.hp < len(c.hits) && c.hits[c.hp] == k
}

// saveCarry keeps copies of the last `before` entries seen (the block's
// tail, preceded by older carried entries if the block had fewer), for the
// Before context of a match at the start of the next block.
func (c *ctxState) saveCarry(b *segment.Block) {
	if c.before == 0 {
		return
	}
	next := c.spare[:0]
	fromBlock := min(len(c.ents), c.before)
	if keep := c.before - fromBlock; keep > 0 && len(c.carry) > 0 {
		old := c.carry[max(0, len(c.carry)-keep):]
		for _, o := range old {
			next = appendCarried(next, o.seq, o.m)
		}
	}
	for i := len(c.ents) - fromBlock; i < len(c.ents); i++ {
		next = appendCarried(next, c.base+int64(i), entryMatch(b, int(c.ents[i]), true))
	}
	c.spare, c.carry = c.carry, next
}

// appendCarried appends a copy of m, reusing the slot's line and
// metadata buffers.
func appendCarried(dst []carried, seq int64, m Match) []carried {
	var buf, abuf []byte
	if len(dst) < cap(dst) {
		slot := dst[:len(dst)+1][len(dst)]
		buf, abuf = slot.line, slot.attrs
	}
	buf = append(buf[:0], m.Line...)
	m.Line = buf
	if len(m.Attrs) > 0 {
		abuf = append(abuf[:0], m.Attrs...)
		m.Attrs = abuf
	} else {
		m.Attrs = nil
	}
	return append(dst, carried{seq: seq, m: m, line: buf, attrs: abuf})
}

// runHeap orders runs by their current entry's time, then by stream;
// descending for Newest.
type runHeap struct {
	rs  []*run
	rev bool
}

func (h *runHeap) Len() int { return len(h.rs) }
func (h *runHeap) Less(i, j int) bool {
	a, b := h.rs[i], h.rs[j]
	if h.rev {
		a, b = b, a
	}
	if a.m.Time != b.m.Time {
		return a.m.Time < b.m.Time
	}
	return a.order < b.order
}
func (h *runHeap) Swap(i, j int) { h.rs[i], h.rs[j] = h.rs[j], h.rs[i] }
func (h *runHeap) Push(x any)    { h.rs = append(h.rs, x.(*run)) }
func (h *runHeap) Pop() any {
	x := h.rs[len(h.rs)-1]
	h.rs = h.rs[:len(h.rs)-1]
	return x
}
