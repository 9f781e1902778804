// The tile kernels' frame, shared by vnni_amd64.s (512-bit) and
// vnniymm_amd64.s (256-bit): they run pairs of rows A and B = A + rstride
// against a group of s vectors, npairs pairs, A advancing by rb bytes. The
// outputs of vector k go to dst + k*dstride bytes, row B's drow bytes
// after row A's; the tiles of three vectors take the first three of a
// group of four, the others all s (used says the same). Registers: R11
// row A, R12 the group's blocks, BX the pairs left, DX the outputs of row
// A for vector 0, R8 rstride, R9 dstride, R10 drow; SI, DI, CX the current
// blocks and how many are left.

// VTILEARGS loads the arguments of
// func(row *byte, rb, rstride, npairs int, act *byte, nblk int, dst *float32, dstride, drow, used int).
#define VTILEARGS \
	MOVQ row+0(FP), R11; \
	MOVQ rstride+16(FP), R8; \
	MOVQ npairs+24(FP), BX; \
	MOVQ act+32(FP), R12; \
	MOVQ dst+48(FP), DX; \
	MOVQ dstride+56(FP), R9; \
	MOVQ drow+64(FP), R10

// VTILEROW starts row pair A (R11) over the group's blocks.
#define VTILEROW \
	MOVQ R11, SI; \
	MOVQ R12, DI; \
	MOVQ nblk+40(FP), CX

// VTILENEXT moves on to the next row pair and its outputs.
#define VTILENEXT \
	ADDQ rb+8(FP), R11; \
	ADDQ $4, DX; \
	DECQ BX
