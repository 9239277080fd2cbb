// Package segment reads and writes Haystack's immutable segment files.
//
// A segment holds a sequence of log entries (time, stream id, bytes and,
// from version 4, structured metadata: package attrs' encoding of the
// name=value pairs a shipper sent beside the line) cut into blocks. Each block is compressed on its own, so a search decodes only
// the blocks it cannot skip, and a scan runs the substring kernel over one
// decoded buffer per block (Block.Data) rather than line by line.
//
// A Writer builds a segment in "<final>.tmp", then Commit fsyncs it, renames
// it into place and fsyncs the directory: a segment either exists complete
// or not at all. A Reader maps the file with mmap and never reads it whole:
// the footer, the block index and the skip index are read through the
// mapping, blocks with pread from a descriptor the Reader keeps (through
// the mapping too past a process-wide budget of descriptors: pread.go).
// Open checks the footer and block index, ReadBlock checks one block.
// ReadBlockLines reads a block without its structured metadata, for
// searches that never show it: the attrs section is neither decompressed
// nor validated (the checksum over the whole block and the header's
// sizes are still checked).
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
// cannot make the reader allocate more than MaxBlockRawBytes of data,
// 2*MaxBlockSize of metadata, and per-entry arrays for at most
// MaxBlockSize entries. Each entry's metadata is checked with
// attrs.Validate, so a reader never hands out metadata the attrs package
// would misread.
//
// # File format, version 7
//
// All fixed-width integers are little-endian. "uvarint" and "varint" are
// encoding/binary's unsigned and zig-zag signed varints.
//
//	+---------------------------------------------------------------+ 0
//	| header (16 bytes)                                             |
//	|   0  [8]  magic "HAYSTSEG"                                    |
//	|   8  u32  format version (7; 1 to 6 are still read)           |
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
//	|                        (versions 3 to 7: of its heads only;   |
//	|                        all three are 0 in version 1)          |
//	|  44  u32  format version (7, equals the header's)             |
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
// Block (stored length L, as recorded in the index; the attrs fields and
// section exist from version 4 on):
//
//	u8       data codec      1 none, 2 LZ4 (one raw LZ4 block), 3 zstd (one frame)
//	u8       meta codec      the same codes
//	u8       attrs codec     the same codes
//	uvarint  entries         equals the index's
//	uvarint  dataRaw         equals the index's rawBytes
//	uvarint  dataStored
//	uvarint  metaRaw         <= 20 * entries + 1
//	uvarint  metaStored
//	uvarint  attrsRaw        <= min(entries * (65536 + 3), 8 MiB)
//	uvarint  attrsStored
//	[dataStored]  data section: the entries' bytes concatenated, compressed
//	[metaStored]  meta section: described below, compressed
//	[attrsStored] attrs section: described below, compressed
//	u32      CRC-32C of every preceding byte of the block
//
// The CRC thus covers the stored bytes and the decoded structure lengths.
// An empty section is stored empty whatever the codec (raw 0 <=> stored 0).
// The writer stores a section with codec 1 (none) when compression does not
// shrink it (the meta section of entries with random times often does not).
// The meta section follows the data section's codec (the writer's, zstd
// for the default, when the data is stored raw); the attrs section gets
// the writer's codec on its own (for the default, LZ4 or zstd chosen for
// it as for a data section).
//
// The attrsRaw bound: an entry's metadata is at most attrs.MaxBytes
// (64 KiB) and its length at most 3 uvarint bytes; a block of several
// entries holds at most MaxBlockSize (4 MiB) counting each entry's line,
// metadata and one byte, and a length of L >= 1 bytes takes at most L
// bytes (1 for L = 0), so the section is at most 2 * MaxBlockSize. The
// writer counts metadata toward the block size to stay within it; a
// reader rejects a larger attrsRaw as corrupt.
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
// Attrs section (decompressed; must be consumed exactly): empty (attrsRaw
// 0) when no entry of the block has metadata, which then costs the block
// three header bytes. Otherwise:
//
//	entries x uvarint   length of each entry's metadata, 0 for none (at
//	                    least one is not 0)
//	the entries' metadata concatenated (Block.AttrData; the lengths'
//	                    prefix sums are Block.AttrOffsets), each one
//	                    package attrs' canonical encoding, at most
//	                    attrs.MaxBytes, which the reader checks
//	                    (attrs.Validate)
//
// Skip index, versions 3 to 7: exact postings (must be consumed exactly):
//
//	uvarint  B              blockCount, equals the block index's
//	uvarint  U              unindexed blocks, <= B
//	when U > 0: uvarint first unindexed block id, then U-1 uvarint
//	         (gap-1) for the others (ascending, < B)
//	uvarint  G              distinct grams
//	ceil(G/32) x group table entry (12 bytes):
//	  u32    the group's first gram
//	  u32    offset of the group's first key in the postings area
//	  u32    CRC-32C of the group's bytes in the postings area
//	postings area (the rest of the section):
//	  per gram, in ascending order:
//	    uvarint  key = delta<<3 | code; delta is the gram minus the
//	             previous one (>= 1), 0 for a group's first gram
//	             (whose value is the table's)
//	    posting payload, by code:
//	      0      every block: nothing follows
//	      1      bitmap: ceil(B/8) bytes, block b is bit b%8 of byte
//	             b/8; the bits from B up are 0
//	      2      every block but a list: uvarint n-1, then n ids
//	      3      a list of n blocks: uvarint n-1, then n ids
//	      4..7   a list of n = code-3 blocks (1..4): n ids
//	    where a list of ids is the first id, then n-1 uvarint
//	    (gap-1): ascending, < B, 1 <= n <= B.
//
// A gram is a 4-byte n-gram (SkipGram) of one entry, never spanning two
// entries, after ASCII lower-casing (A-Z to a-z, other bytes as they
// are), read as a big-endian uint32. Group k holds grams 32k..32k+31 (the
// last group the rest); its bytes run from its offset to the next
// group's (the last: to the section's end) and must be consumed exactly
// by its grams. First grams and offsets strictly increase, the first
// offset is 0, and a group's grams stay below the next group's first.
// An index of no grams has no table and an empty postings area.
//
// A gram's posting is the set of blocks holding it, plus every
// unindexed block. The writer picks the shortest payload (bitmap, list
// or complement; none when every block holds the gram). It leaves a block
// unindexed (listed, and in every posting) when the block has too many
// distinct grams for its size, as random bytes do (their exact index
// would be larger than the block), or when the segment's index would
// outgrow the writer's memory bound; on log text no block is unindexed.
//
// Exactness: MayContain(block, needle) is false exactly when some 4-gram
// of the lowered needle is absent from the block's entries (it is absent
// from the index, or its posting lacks the block) and the block is
// indexed. So false means that no entry of the block contains the
// needle, exactly or ASCII case-insensitively, and a block lacking one
// of the needle's grams is always dropped. True for a block holding
// every gram may still be a block without a match (the grams occur in
// different places or entries). Needles shorter than 4 bytes get "maybe".
// A lookup binary-searches the group table and decodes one group per
// gram of the needle; a Reader caches each needle's block bitmap.
//
// On 1M generated log lines (8 segments of ~32 blocks of 1 MiB, ~150 K
// distinct grams per segment, ~85 K per block) the index takes ~8.8% of
// the stored size, against 6.4% for the version-2 blooms, which let 63 of
// 251 blocks through for the absent needle "status=999" where this index
// lets none through.
//
// Checksums: the footer's skipCRC covers the section's head, that is
// every byte before the postings area (B, U, the unindexed ids, G and
// the group table, whose entries hold the groups' CRCs); each group's
// CRC covers its bytes of the postings area, from its offset to the
// next group's (the last: to the section's end). Together they cover
// every byte of the section. Open checks the framing, the group table
// and skipCRC; damage there does not fail Open (the blocks do not depend
// on their index): the segment opens without a skip index, every lookup
// answers "maybe", and IndexDamage and Verify report a *CorruptError
// naming the file. Open never reads the postings (~700 KiB per segment
// of logs, of which a search decodes a few groups). A lookup checks a group's
// CRC the first time it decodes the group (once per Reader), and then
// decodes it checking the rules above. A group that fails either check
// (damage, or a forgery with valid checksums) is never trusted:
// MayContain answers "maybe" for every block to the needles that reach
// it, so results stay exact and only the skipping is lost, and the
// Reader's IndexDamage reports the first such group as a *CorruptError
// naming the file. Verify checks every group's CRC and rules.
//
// Skip index, version 5: two such indexes (must be consumed exactly):
//
//	uvarint  L    length in bytes of the lines' index
//	[L]           the lines' index: version 3's layout, as above
//	the rest      the metadata values' index: the same layout (B equal)
//	              over the grams of each metadata value of the block's
//	              entries, each value on its own (a gram never spans two
//	              values); names are not indexed
//
// A block without metadata has no grams in the values' index; a segment
// without any has an empty one (three bytes: B, U = 0, G = 0). The
// values' index leaves a block unindexed only past maxBlockCands
// candidates or the segment's table bound, not at gramCandLimit: random
// hex ids record about a candidate per byte but make at most 65,536
// grams. MayContainValue(block, needle) is exact over the values as
// MayContain is over the lines. The footer's skipCRC covers L's bytes
// and both indexes' heads (in that order, as one CRC-32C), and each
// index's groups have their CRCs in its own table; damage and forgeries
// are handled per index as above, and IndexDamage and Verify report
// either.
//
// Skip index, versions 6 and 7: the two indexes of version 5 and value
// filters (must be consumed exactly):
//
//	uvarint  L    length in bytes of the lines' index
//	[L]           the lines' index (version 3's layout)
//	uvarint  V    length in bytes of the metadata values' index
//	[V]           the values' index (version 5's)
//	the rest      the value filters: empty, or
//	  uvarint  B            blockCount, equals the block index's
//	  B x table entry (8 bytes), in block order:
//	    u32    end: offset just past the block's record in the
//	           filters area (non-decreasing; the last equals the
//	           area's length; a record starts at the previous end, 0
//	           for block 0)
//	    u32    CRC-32C of the block's record
//	  filters area: the records concatenated
//
// A block's record is empty (no filter: "maybe" for every value) or u8 k,
// the number of probes (1..16), then F >= 0 bytes: a bloom filter of m =
// 8F bits (bit p is byte p/8, bit p%8) over the block's distinct
// metadata values, whole, byte for byte (not lowered), of every pair of
// every entry whatever its name. F = 0 means the block holds no value.
// An empty value-filters section means that no block of the segment
// holds a metadata value (the writer's choice when none does: a segment
// without metadata costs one byte more than in version 5, V's).
//
// A value v sets (and a lookup tests) bits p_j for j = 0..k-1, where h =
// valueHash(v), h1 = h mod 2^32, h2 = h >> 32, x_j = (h1 + j*h2) mod
// 2^32 and p_j = (x_j * m) >> 32. valueHash reads v as 8-byte
// little-endian words w (the last one zero-padded), with c1 =
// 0x9E3779B97F4A7C15, c2 = 0xBF58476D1CE4E5B9, c3 = 0x94D049BB133111EB,
// all arithmetic mod 2^64:
//
//	h = (len(v)+1) * c1
//	per word:  h = (h xor w) * c2; h = h xor (h >> 29)
//	finally:   h ^= h >> 30; h *= c2; h ^= h >> 27; h *= c3; h ^= h >> 31
//
// The writer gives a block ceil(10n/8) bytes for its n distinct values
// (k = round(8F/n * ln 2): 7, ~0.8% false positives), at most
// max(64, 1/8 of the block's stored length) bytes (fewer bits a value,
// more false positives), and no filter when that leaves under 2 bits a
// value. So a filter costs ~1.25 bytes a distinct value and at most an
// eighth of the block.
//
// MayHaveValue(block, v) is false only when the block's (checked) filter
// lacks one of v's bits, or its record has no bits: no metadata value of
// the block equals v. It never answers for a substring: label filters
// that need a substring or a regex ask the values' grams. The footer's
// skipCRC covers, as one CRC-32C in this order: L's bytes, the lines'
// index's head, V's bytes, the values' index's head, and B and the
// table. Open checks the table (ends in range and non-decreasing) but
// never reads the records: a lookup checks a block's record's CRC (and
// its k) the first time it reads it; a bad record is never trusted (its
// block answers "maybe"), and IndexDamage reports it ("metadata values:
// value filter of block N: checksum mismatch") naming the file; Verify
// checks every record.
//
// Skip index, version 7: version 6's layout, and the lines' index also
// holds escape grams. For each ASCII character c (c < 0x80) that an
// escape in some entry of a block spells, the lines' index lists the
// block under the gram 'E' 'S' 'C' c (0x455343 << 8 | c). An escape is a
// backslash followed by 'u' or 'U' and 4 or 8 hex digits, 'x' or 'X' and
// 2, or 3 octal digits (letters and hex digits in either case), whose
// value is c; the writer reads one at every backslash of an entry,
// whatever precedes it, so an escaped backslash before "u0035" counts as
// an escape of '5' (more blocks listed than the parsers would decode
// '5' in, never fewer). Escapes never span two entries. Lowered text has
// no upper-case ASCII letter, so no 4-gram of an entry is an escape
// gram; a needle (MayContain) never asks for one. MayHoldEscape(block,
// c) is false exactly when the block is indexed and none of its entries
// holds an escape of c (the gram is absent, or its posting lacks the
// block).
//
// Skip index, version 2: bloom filters (must be consumed exactly):
//
//	uvarint  blockCount     equals the block index's
//	per block, in file order:
//	  uvarint  filter size F in bytes, a power of two, 8 <= F <= 32 KiB
//	  [F]      bloom filter of m = 8F bits: bit p is byte p/8, bit p%8
//	  u32      CRC-32C of this block's size varint and filter
//
// A block's filter has bit p set for every 4-gram of each of its entries
// (lowered and never spanning entries, as in version 3), with one hash
// function: the 4-gram as a big-endian uint32 g, h = (g *
// 0x9E3779B97F4A7C15) mod 2^64 >> 32, p = h mod m. The writer picked m
// near 1.25 bits per distinct 4-gram of the block (estimated).
// MayContain(block, needle) is false only when some 4-gram of the lowered
// needle has its bit clear: no false negatives, but false positives
// (~46% per gram on generated logs). Damage to a version-2 skip index
// opens the segment without one, and IndexDamage and Verify report a
// *CorruptError naming the file (and the block, in the reason, when its
// record's CRC fails).
//
// # Versions
//
// Version 2 added the skip index at skipOffset/skipLength with skipCRC and
// left the rest of the layout alone. Version 3 replaced the per-block
// bloom filters in that section with the exact postings index; nothing
// else changed. Version 4 added the attrs codec byte, attrsRaw and
// attrsStored to the block header and the attrs section after the meta
// section; nothing else changed (the index and skip index are version
// 3's, and the skip index covers lines only, never metadata). Blocks of
// versions 1 to 3 have neither: their entries have no metadata. Version 5
// changed only the skip index, which adds an index of the metadata
// values (Reader.MetaIndexed, MayContainValue), so that a label filter
// that needs a value (`| trace_id="..."`) skips the blocks without it; a
// version-4 block must never be skipped for a value, since its index
// does not know them. A segment without metadata costs 4 to 7 bytes
// more than in version 4 (L and the empty values' index).
//
// Why an index of its own rather than the values' grams among the
// lines': measured on 1M OTel-like entries (docs/BENCHMARKS.md, "Skip
// index over metadata"), span ids put most of the 65,536 hex grams in
// every block, so a line search for a number ("84213", absent from every
// line) read 125 of 423 blocks where the lines' index reads none. Two
// indexes cost the same bytes and keep line searches exact. Names are
// left out: the filters that need a value do not know which name it is
// stored under (a pair whose name the stream has is read as
// name_extracted), and a handful of names is in every block anyway.
//
// Version 6 changed only the skip index again: the values' index is
// framed by its length and per-block filters of whole metadata values
// follow (Reader.ValueFiltered, MayHaveValue), so that a label filter
// that needs an exact value (`| trace_id="..."`, `=~"a|b"`) skips the
// blocks without it. Why (review R11c-2): with short log bodies a 1 MiB
// block holds ~14,000 entries, whose hex trace and span ids hold ~95% of
// the 65,536 hex 4-grams, so the values' grams said "maybe" for an
// absent trace id in 17 of 18 blocks; a filter of whole values does not
// saturate (~0.8% false positives per block at 10 bits a value), and
// still prunes where the budget gave the values' grams up (unique base62
// ids). Names are left out, as in the values' index: a matcher on x may
// read a pair named x, x_extracted or (for x_extracted) x, so a filter of
// (name, value) pairs would have to be asked for each; a value under
// another name only costs a false positive.
//
// Version 7 changed only the meaning of the lines' index: it also holds
// escape grams (Reader.EscapeIndexed, MayHoldEscape), so that a label
// filter after json or logfmt whose value the line may spell with
// escapes (`| json | trace_id="5f89..."`: '5' may be written \u0035)
// asks whether a block holds an escape of the value's characters rather
// than whether it holds every 4-gram of such an escape. Why: JSON written
// by Go's encoding/json or log/slog escapes '<', '>' and '&' as \u003c,
// \u003e and \u0026, so \u00 and u003 are in every block where a
// tenth of the lines hold one, and hex ids put 0030 ... 0039 and 0061 ...
// 0066 in nearly every block of 1 MiB: the 4-grams of \u0035 were in
// almost every block, and such a filter decoded every block
// (docs/BENCHMARKS.md, "Label filters after a parser use the skip
// index"). A block holds at most 128 escape grams; a segment's postings
// grow by a few bytes for each character some escape spells.
//
// A reader accepts versions 1 to 7; version 1 requires the skip fields to
// be zero, and its blocks answer "maybe" to every needle. A reader of an
// older build refuses a version-7 file as corrupt ("unsupported format
// version 7"). The Writer writes version 7, or version 6, 5 or 4 when
// Options.Version asks (for a build before version 7, 6 or 5 to read;
// tests also write versions 2 and 3, to keep their readers tested). A
// block of versions 3 to 6 answers "maybe" to MayHoldEscape: a search
// asks its lines' index for the escapes' own 4-grams instead.
package segment
