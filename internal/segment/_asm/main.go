// Command _asm generates the amd64 gram scan of package segment
// (grams_amd64.s and grams_stubs_amd64.go) with avo. Run it through
// `go generate ./internal/segment/` from the repository root.
//
// scanGrams is segment's scanGramsGo in assembly: per byte c of chunk,
// g = g<<8 | lowerTable[c]; h = g * gramMul; cand[n] = h; the cache slot
// h >> (32-gramCacheBits) gets tag uint16(h) | 0x8000, and n grows by one
// when the slot held another tag. The loop is bound by its instruction
// count (its cache loads are independent and overlap): the compiler's
// version takes ~20 instructions a byte, this one 15, and the increment
// is branch-free (with x = old ^ tag in the low 16 bits, CMPW x, $1 sets
// the carry exactly when x == 0, and SBBQ $-1 adds 1 minus the carry).
// The caller guarantees len(cand) >= len(chunk).
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// These must equal segment's gramCacheBits and gramMul; grams_amd64.go
// fails to compile if they change there.
const (
	gramCacheBits = 17
	gramMul       = 0x9E3779B1
)

func main() {
	ConstraintExpr("!purego")
	TEXT("scanGrams", NOSPLIT, fmt.Sprintf("func(cache *[%d]uint16, cand []uint32, gram uint32, chunk []byte) (int, uint32)", 1<<gramCacheBits))
	Pragma("noescape")
	Doc("scanGrams is scanGramsGo in assembly (see _asm/main.go).")

	cache := Load(Param("cache"), GP64())
	cand := Load(Param("cand").Base(), GP64())
	g := Load(Param("gram"), GP32())
	p := Load(Param("chunk").Base(), GP64())
	end := Load(Param("chunk").Len(), GP64())
	lower := GP64()
	LEAQ(NewDataAddr(Symbol{Name: "·lowerTable"}, 0), lower)
	n := GP64()
	XORL(n.As32(), n.As32())
	ADDQ(p, end)

	c, h, slot, old := GP32(), GP32(), GP64(), GP32()
	step := func(disp int) {
		MOVBLZX(Mem{Base: p, Disp: disp}, c)
		MOVBLZX(Mem{Base: lower, Index: c.As64(), Scale: 1}, c)
		SHLL(U8(8), g)
		ORL(c, g)
		IMUL3L(U32(gramMul), g, h)
		MOVL(h, Mem{Base: cand, Index: n, Scale: 4})
		MOVL(h, slot.As32())
		SHRL(U8(32-gramCacheBits), slot.As32())
		ORL(U32(0x8000), h)
		MOVWLZX(Mem{Base: cache, Index: slot, Scale: 2}, old)
		MOVW(h.As16(), Mem{Base: cache, Index: slot, Scale: 2})
		XORL(h, old)
		CMPW(old.As16(), U16(1))
		SBBQ(I8(-1), n)
	}

	Comment("Four bytes at a time while p < end-3.")
	end4 := GP64()
	LEAQ(Mem{Base: end, Disp: -3}, end4)
	CMPQ(p, end4)
	JGE(LabelRef("tail"))
	Label("loop4")
	for i := range 4 {
		step(i)
	}
	ADDQ(U8(4), p)
	CMPQ(p, end4)
	JLT(LabelRef("loop4"))

	Label("tail")
	CMPQ(p, end)
	JEQ(LabelRef("done"))
	Label("loop1")
	step(0)
	INCQ(p)
	CMPQ(p, end)
	JNE(LabelRef("loop1"))

	Label("done")
	Store(n, ReturnIndex(0))
	Store(g, ReturnIndex(1))
	RET()
	Generate()
}
