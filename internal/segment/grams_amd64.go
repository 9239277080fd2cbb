package segment

// scanGrams is scanGramsGo in assembly (grams_amd64.s): the loop is
// bound by its instruction count (its cache loads are independent and
// overlap), and the compiler's version takes ~20 instructions a byte
// where the assembly takes 15: 16% of ingest's CPU was this loop.
// It relies on len(cand) >= len(chunk), which add guarantees.
//
//go:noescape
func scanGrams(cache *[1 << gramCacheBits]uint16, cand []uint32, gram uint32, chunk []byte) (int, uint32)

// The assembly shifts by 32-gramCacheBits and multiplies by gramMul as
// literals: these fail to compile if either changes.
const (
	_ = uint(gramCacheBits - 17)
	_ = uint(17 - gramCacheBits)
	_ = uint32(gramMul - 0x9E3779B1)
	_ = uint32(0x9E3779B1 - gramMul)
)
