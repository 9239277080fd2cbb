#include "textflag.h"

// func scanGrams(cache *[1 << gramCacheBits]uint16, cand []uint32, gram uint32, chunk []byte) (int, uint32)
//
// Per byte c: g = g<<8 | lowerTable[c]; h = g * gramMul; cand[n] = h;
// slot = h >> 15, tag = uint16(h) | 0x8000; n += cache[slot] != tag;
// cache[slot] = tag. The increment is branch-free: with x = old ^ tag
// (low 16 bits), CMPW x, $1 sets the carry exactly when x == 0, and
// SBBQ $-1 adds 1 minus the carry.
TEXT ·scanGrams(SB), NOSPLIT, $0-76
	MOVQ cache+0(FP), DI
	MOVQ cand_base+8(FP), SI
	MOVL gram+32(FP), DX
	MOVQ chunk_base+40(FP), BX
	MOVQ chunk_len+48(FP), CX
	LEAQ ·lowerTable(SB), R8
	XORL AX, AX
	ADDQ BX, CX
	LEAQ -3(CX), R13 // four bytes at a time while BX < R13
	CMPQ BX, R13
	JGE  tail

loop4:
	MOVBLZX 0(BX), R9
	MOVBLZX (R8)(R9*1), R9
	SHLL    $8, DX
	ORL     R9, DX
	IMUL3L  $-1640531535, DX, R10
	MOVL    R10, (SI)(AX*4)
	MOVL    R10, R11
	SHRL    $15, R11
	ORL     $0x8000, R10
	MOVWLZX (DI)(R11*2), R12
	MOVW    R10, (DI)(R11*2)
	XORL    R10, R12
	CMPW    R12, $1
	SBBQ    $-1, AX
	MOVBLZX 1(BX), R9
	MOVBLZX (R8)(R9*1), R9
	SHLL    $8, DX
	ORL     R9, DX
	IMUL3L  $-1640531535, DX, R10
	MOVL    R10, (SI)(AX*4)
	MOVL    R10, R11
	SHRL    $15, R11
	ORL     $0x8000, R10
	MOVWLZX (DI)(R11*2), R12
	MOVW    R10, (DI)(R11*2)
	XORL    R10, R12
	CMPW    R12, $1
	SBBQ    $-1, AX
	MOVBLZX 2(BX), R9
	MOVBLZX (R8)(R9*1), R9
	SHLL    $8, DX
	ORL     R9, DX
	IMUL3L  $-1640531535, DX, R10
	MOVL    R10, (SI)(AX*4)
	MOVL    R10, R11
	SHRL    $15, R11
	ORL     $0x8000, R10
	MOVWLZX (DI)(R11*2), R12
	MOVW    R10, (DI)(R11*2)
	XORL    R10, R12
	CMPW    R12, $1
	SBBQ    $-1, AX
	MOVBLZX 3(BX), R9
	MOVBLZX (R8)(R9*1), R9
	SHLL    $8, DX
	ORL     R9, DX
	IMUL3L  $-1640531535, DX, R10
	MOVL    R10, (SI)(AX*4)
	MOVL    R10, R11
	SHRL    $15, R11
	ORL     $0x8000, R10
	MOVWLZX (DI)(R11*2), R12
	MOVW    R10, (DI)(R11*2)
	XORL    R10, R12
	CMPW    R12, $1
	SBBQ    $-1, AX
	ADDQ    $4, BX
	CMPQ    BX, R13
	JLT     loop4

tail:
	CMPQ BX, CX
	JEQ  done

loop1:
	MOVBLZX 0(BX), R9
	MOVBLZX (R8)(R9*1), R9
	SHLL    $8, DX
	ORL     R9, DX
	IMUL3L  $-1640531535, DX, R10
	MOVL    R10, (SI)(AX*4)
	MOVL    R10, R11
	SHRL    $15, R11
	ORL     $0x8000, R10
	MOVWLZX (DI)(R11*2), R12
	MOVW    R10, (DI)(R11*2)
	XORL    R10, R12
	CMPW    R12, $1
	SBBQ    $-1, AX
	INCQ    BX
	CMPQ    BX, CX
	JNE     loop1

done:
	MOVQ AX, ret+64(FP)
	MOVL DX, ret1+72(FP)
	RET
