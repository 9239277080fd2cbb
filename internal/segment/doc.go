// Package segment reads and writes Haystack's immutable segment files.
//
// A segment holds a sequence of log entries (time, stream id, bytes) cut
// into blocks. Each block is compressed on its own, so a search decodes only
// the blocks it cannot skip, and a scan runs the substring kernel over one
// decoded buffer per block (Block.Data) rather than line by line.
//
// A Writer builds a segment in "<final>.tmp", then Commit fsyncs it, renames
// it into place and fsyncs the directory: a segment either exists complete
// or not at all. A Reader maps the file with mmap and never reads it whole;
// Open checks the footer and block index, ReadBlock checks one block.
//
// # Damage
//
// Every byte of a segment is covered by an exact comparison (magic, sizes,
// offsets) or a CRC-32C (Castagnoli) checksum, so a truncated file or a
// flipped bit is reported as a *CorruptError naming the file and, when the
// damage is inside a block, the block. Damage never panics and never yields
// wrong rows. All lengths are checked against the mapped size before
// slicing, and a block's decoded sizes come from the checksummed index and
// block header and are enforced while decompressing, so a corrupt length
// cannot make the reader allocate more than MaxBlockRawBytes of data plus
// per-entry arrays for at most MaxBlockSize entries.
//
// # File format, version 2
//
// All fixed-width integers are little-endian. "uvarint" and "varint" are
// encoding/binary's unsigned and zig-zag signed varints.
//
//	+---------------------------------------------------------------+ 0
//	| header (16 bytes)                                             |
//	|   0  [8]  magic "HAYSTSEG"                                    |
//	|   8  u32  format version (2; 1 is still read)                 |
//	|  12  u32  flags (0; a reader rejects unknown flags)           |
//	+---------------------------------------------------------------+ 16
//	| block 0 | block 1 | ... | block n-1   (contiguous, no gaps)   |
//	+---------------------------------------------------------------+ indexOffset
//	| block index (indexLength bytes)                               |
//	+---------------------------------------------------------------+ skipOffset
//	| skip index (skipLength bytes; absent in version 1)            |
//	+---------------------------------------------------------------+ size-72
//	| footer (72 bytes)                                             |
//	|   0  u64  indexOffset  (= 16 + sum of block lengths)          |
//	|   8  u64  indexLength                                         |
//	|  16  u32  indexCRC     CRC-32C of the block index bytes       |
//	|  20  u32  blockCount   (equals the count in the index)        |
//	|  24  u64  skipOffset   (= indexOffset + indexLength)          |
//	|  32  u64  skipLength   (skipOffset + skipLength = size-72)    |
//	|  40  u32  skipCRC      CRC-32C of the skip index bytes        |
//	|                        (all three are 0 in version 1)         |
//	|  44  u32  format version (2, equals the header's)             |
//	|  48  u64  file size in bytes                                  |
//	|  56  u32  flags (0)                                           |
//	|  60  u32  footerCRC    CRC-32C of footer bytes 0..59          |
//	|  64  [8]  magic "HAYSTSEG"                                    |
//	+---------------------------------------------------------------+ size
//
// Block index (all fields varints, no padding; must be consumed exactly):
//
//	uvarint  blockCount
//	per block, in file order:
//	  uvarint  stored length of the block in bytes (header, sections, CRC)
//	  varint   minTime        unix nanoseconds
//	  uvarint  maxTime-minTime
//	  uvarint  entries        >= 1
//	  uvarint  rawBytes       sum of the entries' lengths (len(Block.Data))
//	  uvarint  streamCount    >= 1, <= entries
//	  uvarint  first stream id, then streamCount-1 uvarint deltas >= 1
//	           (the distinct streams present, ascending)
//
// A block's file offset is 16 plus the lengths of the blocks before it.
//
// Block (stored length L, as recorded in the index):
//
//	u8       data codec      1 none, 2 LZ4 (one raw LZ4 block), 3 zstd (one frame)
//	u8       meta codec      the same codes
//	uvarint  entries         equals the index's
//	uvarint  dataRaw         equals the index's rawBytes
//	uvarint  dataStored
//	uvarint  metaRaw         <= 25 * entries
//	uvarint  metaStored
//	[dataStored] data section: the entries' bytes concatenated, compressed
//	[metaStored] meta section: described below, compressed
//	u32      CRC-32C of every preceding byte of the block
//
// The CRC thus covers the stored bytes and the decoded structure lengths.
// An empty section is stored empty whatever the codec (raw 0 <=> stored 0).
// The writer stores a section with codec 1 (none) when compression does not
// shrink it (the meta section of entries with random times often does not).
//
// Meta section (decompressed; must be consumed exactly):
//
//	entries x uvarint   entry lengths (Block.Offsets are their prefix sums;
//	                    they must add up to dataRaw)
//	u8                  time scale k, 0..18
//	varint              time of the first entry
//	entries-1 x varint  each next time's difference from the previous one,
//	                    divided by 10^k (two's-complement wrap-around; the
//	                    writer picks the largest k dividing them all, so
//	                    millisecond logs store milliseconds). Time need not
//	                    increase: streams interleave and clocks go back.
//	                    Every time lies in the index's [minTime, maxTime],
//	                    and both bounds occur.
//	entries x uvarint   stream of each entry, as an index into the index's
//	                    stream list for the block (every listed stream
//	                    occurs); absent when that list has one stream.
//
// Skip index (version 2; must be consumed exactly):
//
//	uvarint  blockCount     equals the block index's
//	per block, in file order:
//	  uvarint  filter size F in bytes, a power of two, 8 <= F <= 32 KiB
//	  [F]      bloom filter of m = 8F bits: bit p is byte p/8, bit p%8
//	  u32      CRC-32C of this block's size varint and filter
//
// A block's filter has bit p set for every 4-gram (SkipGram) of each of
// its entries, never spanning two entries, after ASCII lower-casing
// (A-Z to a-z, other bytes as they are), with one hash function: the
// 4-gram's bytes as a big-endian uint32 g, h = (g * 0x9E3779B97F4A7C15)
// mod 2^64 >> 32, p = h mod m. The writer picks m near 1.25 bits per
// distinct 4-gram of the block (estimated), so on log text the index is
// ~10% of the file (docs/BENCHMARKS.md, "Skip index (issue 6)").
// MayContain(block, needle) is false only when some 4-gram of the lowered
// needle has its bit clear, so no entry of the block contains the needle,
// exactly or ASCII case-insensitively: no false negatives. Needles
// shorter than 4 bytes get "maybe".
//
// Damage to the skip index fails Open with a *CorruptError naming the file
// (and the block, in the reason, when its record's CRC fails): a damaged
// filter is never used, since a flipped bit could drop a block wrongly.
//
// # Versions
//
// Version 2 added the skip index at skipOffset/skipLength with skipCRC and
// left the rest of the layout alone. A reader accepts versions 1 and 2;
// version 1 requires the skip fields to be zero, and its blocks answer
// "maybe" to every needle. The Writer writes version 2.
package segment
