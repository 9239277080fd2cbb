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
// # File format, version 1
//
// All fixed-width integers are little-endian. "uvarint" and "varint" are
// encoding/binary's unsigned and zig-zag signed varints.
//
//	+---------------------------------------------------------------+ 0
//	| header (16 bytes)                                             |
//	|   0  [8]  magic "HAYSTSEG"                                    |
//	|   8  u32  format version (1)                                  |
//	|  12  u32  flags (0; a reader rejects unknown flags)           |
//	+---------------------------------------------------------------+ 16
//	| block 0 | block 1 | ... | block n-1   (contiguous, no gaps)   |
//	+---------------------------------------------------------------+ indexOffset
//	| block index (indexLength bytes)                               |
//	+---------------------------------------------------------------+ skipOffset
//	| skip index (version 2; absent in version 1)                   |
//	+---------------------------------------------------------------+ size-72
//	| footer (72 bytes)                                             |
//	|   0  u64  indexOffset  (= 16 + sum of block lengths)          |
//	|   8  u64  indexLength                                         |
//	|  16  u32  indexCRC     CRC-32C of the block index bytes       |
//	|  20  u32  blockCount   (equals the count in the index)        |
//	|  24  u64  skipOffset   reserved for the per-block n-gram      |
//	|  32  u64  skipLength     skip index of version 2 (issue 6);   |
//	|  40  u32  skipCRC        all three are 0 in version 1         |
//	|  44  u32  format version (1, equals the header's)             |
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
// # Versions
//
// Version 2 will add the per-block n-gram skip index of issue 6 at
// skipOffset/skipLength with its own checksum in skipCRC, and leave the rest
// of the layout alone. A reader accepts the versions it knows; version 1
// requires the skip fields to be zero.
package segment
