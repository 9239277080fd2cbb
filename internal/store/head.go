package store

import (
	"math"
	"slices"

	"haystack/internal/segment"
)

// perEntryOverhead is what an entry costs in the head beyond its bytes: an
// offset, a time and a stream id. Counting it keeps the memory bound honest
// for inputs of many short lines.
const perEntryOverhead = 4 + 8 + 4

// head holds the entries that are in the WAL but not yet in a segment, in
// ingestion order, as blocks shaped like decoded segment blocks.
//
// Its blocks are cut exactly as the segment writer cuts blocks of
// blockSize (segment.Options.BlockSize; 0 means the default): an entry
// counts as its length plus its metadata's plus one, an entry that would take a non-empty
// block past blockSize starts the next one, and a block that reaches it
// is full. So a search treats head and segments alike, and each head
// block becomes one segment block, handed to the writer without copying
// (segment.Writer.AddBlock).
type head struct {
	blocks    []*headBlock
	bytes     int64 // raw bytes + per-entry overhead
	entries   int64
	blockSize int
	// spare holds emptied blocks of an earlier, flushed head for the next
	// blocks (see recycle): fresh ones, allocated and faulted in for every
	// head, cost ingest CPU (sys time 0.42 -> 0.33 s on 256 MB of logs)
	// and let garbage raise its peak RSS.
	spare []*headBlock
}

type headBlock struct {
	b    segment.Block
	meta segment.BlockMeta
	// meta.Streams is kept in first-seen order while the block fills
	// (unsorted says whether that is out of order) and sorted when the
	// block is handed out (sortStreams): sorting at every new stream, or
	// inserting in order, made a block of k streams cost O(k²), and a
	// push of 100,000 new streams 22 s under the writer's lock. Past a
	// few streams, membership is a set.
	unsorted bool
	streams  map[uint32]struct{}
}

// smallStreamSet is how many streams a block checks by scanning its list
// before it keeps a set.
const smallStreamSet = 16

// addStream records that the block holds stream id.
func (hb *headBlock) addStream(id uint32) {
	m := &hb.meta
	if hb.streams == nil {
		if slices.Contains(m.Streams, id) {
			return
		}
		if len(m.Streams) >= smallStreamSet {
			hb.streams = make(map[uint32]struct{}, 2*smallStreamSet)
			for _, s := range m.Streams {
				hb.streams[s] = struct{}{}
			}
		}
	}
	if hb.streams != nil {
		if _, ok := hb.streams[id]; ok {
			return
		}
		hb.streams[id] = struct{}{}
	}
	if n := len(m.Streams); n > 0 && m.Streams[n-1] > id {
		hb.unsorted = true
	}
	m.Streams = append(m.Streams, id)
}

// sortStreams sorts meta.Streams in place, for a block no longer
// appended to.
func (hb *headBlock) sortStreams() {
	if hb.unsorted {
		slices.Sort(hb.meta.Streams)
		hb.unsorted = false
	}
}

// size is the head's block size.
func (h *head) size() int {
	if h.blockSize > 0 {
		return h.blockSize
	}
	return segment.DefaultBlockSize
}

// fill is what the block's entries count toward its size, as the segment
// writer counts them.
func (hb *headBlock) fill() int { return len(hb.b.Data) + len(hb.b.AttrData) + len(hb.b.Times) }

func (h *head) add(e Entry) {
	var hb *headBlock
	if n := len(h.blocks); n > 0 && segment.BlockHasRoom(h.blocks[n-1].fill(), len(e.Line)+len(e.Attrs), h.size()) {
		hb = h.blocks[n-1]
	} else {
		if k := len(h.spare); k > 0 && cap(h.spare[k-1].b.Data) >= len(e.Line) {
			hb, h.spare = h.spare[k-1], h.spare[:k-1]
		} else {
			hb = &headBlock{}
			// Sized up front: growing by append would leave up to half of
			// every block's capacity unused, doubling the head's footprint.
			hb.b.Data = make([]byte, 0, max(h.size(), len(e.Line)))
		}
		hb.meta = segment.BlockMeta{MinTime: math.MaxInt64, MaxTime: math.MinInt64, Streams: hb.meta.Streams[:0]}
		hb.unsorted, hb.streams = false, nil
		hb.b.Offsets = append(hb.b.Offsets[:0], 0)
		hb.b.AttrData, hb.b.AttrOffsets = hb.b.AttrData[:0], hb.b.AttrOffsets[:0]
		h.blocks = append(h.blocks, hb)
	}
	if len(e.Attrs) > 0 || len(hb.b.AttrOffsets) > 0 {
		// AttrOffsets stays empty until an entry of the block has
		// metadata (a segment block's is empty when none has), then
		// starts with the empty metadata of the entries before it.
		if len(hb.b.AttrOffsets) == 0 {
			hb.b.AttrOffsets = append(hb.b.AttrOffsets, make([]uint32, len(hb.b.Times)+1)...)
		}
		hb.b.AttrData = append(hb.b.AttrData, e.Attrs...)
		hb.b.AttrOffsets = append(hb.b.AttrOffsets, uint32(len(hb.b.AttrData)))
	}
	hb.b.Data = append(hb.b.Data, e.Line...)
	hb.b.Offsets = append(hb.b.Offsets, uint32(len(hb.b.Data)))
	hb.b.Times = append(hb.b.Times, e.Time)
	hb.b.Streams = append(hb.b.Streams, e.Stream)
	m := &hb.meta
	m.MinTime = min(m.MinTime, e.Time)
	m.MaxTime = max(m.MaxTime, e.Time)
	m.Entries++
	m.RawBytes += len(e.Line)
	hb.addStream(e.Stream)
	h.bytes += int64(len(e.Line)+len(e.Attrs)) + perEntryOverhead
	h.entries++
}

func (h *head) reset() { *h = head{spare: h.spare, blockSize: h.blockSize} }

// recycle empties blocks, which nothing references any more, into the
// spare blocks; a block grown for a huge entry is left to the collector.
func (h *head) recycle(blocks []*headBlock) {
	for _, hb := range blocks {
		if cap(hb.b.Data) > h.size() || cap(hb.b.AttrData) > h.size() {
			continue
		}
		hb.b.Data, hb.b.Times, hb.b.Streams = hb.b.Data[:0], hb.b.Times[:0], hb.b.Streams[:0]
		hb.b.AttrData, hb.b.AttrOffsets = hb.b.AttrData[:0], hb.b.AttrOffsets[:0]
		h.spare = append(h.spare, hb)
	}
}

// HeadPart exposes the head as a sequence of blocks for search. It is a
// read-only view; the store does not change it after handing it out.
type HeadPart struct {
	blocks []*headBlock
}

// newHeadPart hands out blocks that are no longer appended to, their
// stream lists sorted as BlockMeta promises.
func newHeadPart(blocks []*headBlock) *HeadPart {
	for _, hb := range blocks {
		hb.sortStreams()
	}
	return &HeadPart{blocks: blocks}
}

// Name identifies the head in messages.
func (p *HeadPart) Name() string { return "head (wal)" }

// NumBlocks is the number of in-memory blocks.
func (p *HeadPart) NumBlocks() int { return len(p.blocks) }

// BlockMeta describes block i.
func (p *HeadPart) BlockMeta(i int) segment.BlockMeta { return p.blocks[i].meta }

// MayContain is always true: the head has no skip index (it is small and
// in memory, and a search scans it whole).
func (p *HeadPart) MayContain(i int, lit []byte, fold bool) bool { return true }

// ReadBlock copies block i into dst, reusing dst's buffers. dst's
// AttrData and AttrOffsets are empty when no entry of the block has
// metadata, as a segment's ReadBlock leaves them.
func (p *HeadPart) ReadBlock(i int, dst *segment.Block) error {
	src := &p.blocks[i].b
	dst.Data = append(dst.Data[:0], src.Data...)
	dst.Offsets = append(dst.Offsets[:0], src.Offsets...)
	dst.Times = append(dst.Times[:0], src.Times...)
	dst.Streams = append(dst.Streams[:0], src.Streams...)
	dst.AttrData = append(dst.AttrData[:0], src.AttrData...)
	dst.AttrOffsets = append(dst.AttrOffsets[:0], src.AttrOffsets...)
	return nil
}
