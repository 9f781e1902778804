package tensor

// Register tiles for the repacked block types: eight rows against each
// vector at once (llama.cpp's repacked gemv and gemm keep eight rows in
// the lanes of one register), each (row, vector) in the arithmetic of its
// one-row function, so that the bits do not depend on the tile. The
// kernels are in kquant_tile_amd64.s; the plain-Go functions below are
// their twins.

// legacyTileGo is eight rows of a repacked Q4_0 or IQ4_NL matrix (w: the
// first row's nb blocks, rows rb bytes apart) against n vectors' Q8_0
// blocks (act[v*astride:]), each acc[8v+r] stepping block by block as
// dotLegacyRepacked's acc does. The twin of legacyTileAVX2.
func legacyTileGo(t DType, w []byte, rb int, act []q8Act, astride, nb, n int, acc []float32) {
	var lv [32]int8
	for r := 0; r < 8; r++ {
		row := w[r*rb : r*rb+nb*q4_0Bytes]
		for b := 0; b < nb; b++ {
			blk := row[b*q4_0Bytes : (b+1)*q4_0Bytes]
			unpackLegacy(t, &lv, blk)
			dw := f16At(blk)
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				var s int32
				for j := range lv {
					s += int32(lv[j]) * int32(a.q[j])
				}
				acc[8*v+r] = fmaF(float32(s), dw*a.d, acc[8*v+r])
			}
		}
	}
}

// q4kTileGo is eight rows of a repacked Q4_K matrix (w: the first row's
// nb blocks, rows rb bytes apart) against n vectors' Q8_K blocks
// (act[v*astride:]): acc[16v+r] and acc[16v+8+r] step block by block as
// dotQ4KRepacked's acc and accMin do for row r and vector v. The twin of
// q4kTileAVX2.
func q4kTileGo(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	var sc, mins [8]int32
	for r := 0; r < 8; r++ {
		row := w[r*rb : r*rb+nb*q4KBytes]
		for b := 0; b < nb; b++ {
			blk := row[b*q4KBytes : (b+1)*q4KBytes]
			q4KScales(blk[4:16], &sc, &mins)
			dw, dmin := f16At(blk), f16At(blk[2:])
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				var s, sm int32
				for c := 0; c < 8; c++ {
					var p int32
					for k := 0; k < 32; k++ {
						q := blk[16+32*(c/2)+k]
						if c%2 == 1 {
							q >>= 4
						}
						p += int32(q&0xF) * int32(a.q[32*c+k])
					}
					s += sc[c] * p
					sm += mins[c] * (int32(a.bsums[2*c]) + int32(a.bsums[2*c+1]))
				}
				acc[16*v+r] = fmaF(float32(s), dw*a.d, acc[16*v+r])
				acc[16*v+8+r] = fmaF(float32(sm), dmin*a.d, acc[16*v+8+r])
			}
		}
	}
}

// q6kTileGo is two rows of a Q6_K matrix (w, w[rb:]; nb blocks each)
// against n vectors' Q8_K blocks (act[v*astride:]): acc[16v+8h:16v+8h+8]
// are the eight lanes of row h and vector v, stepping block by block as
// dotQ6K's do. The twin of q6kTileAVX512.
func q6kTileGo(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	var lv [64]int32
	var s [8]int32
	var s16 [16]int32
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*q6KBytes]
		for b := 0; b < nb; b++ {
			blk := row[b*q6KBytes : (b+1)*q6KBytes]
			for i := range s16 {
				s16[i] = int32(int8(blk[192+i]))
			}
			for c := 0; c < 8; c++ { // lanes 0-3 of a chunk are its first 16 values
				for l := 0; l < 8; l++ {
					lv[8*c+l] = s16[2*c+l/4]
				}
			}
			dw := f16At(blk[208:])
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				q6kLanesGo(blk[0:128], blk[128:192], &a.q, &lv, &s)
				for m := 0; m < 8; m++ {
					s[m] -= (int32(a.bsums[2*m])*s16[2*m] + int32(a.bsums[2*m+1])*s16[2*m+1]) << 5
				}
				(*laneAcc)(acc[16*v+8*h:16*v+8*h+8]).step(a.d*dw, &s)
			}
		}
	}
}

// q5kTileGo is two rows of a Q5_K matrix (w, w[rb:]; nb blocks each)
// against n vectors' Q8_K blocks (act[v*astride:]), stepping block by
// block as dotQ5K does: acc[32v+8h:32v+8h+8] the lanes of row h and
// vector v, acc[32v+16+4h:32v+20+4h] its summs (four copies). The twin of
// q5kTileAVX512.
func q5kTileGo(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	var wv [qkK]int8
	var sc [16]int32
	var mins [8]int32
	var s [8]int32
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*q5KBytes]
		for b := 0; b < nb; b++ {
			blk := row[b*q5KBytes : (b+1)*q5KBytes]
			unpackQ45K(&wv, &sc, &mins, blk[4:16], blk[16:48], blk[48:176])
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				var sm int32
				for k := 0; k < 8; k++ {
					sm += mins[k] * (int32(a.bsums[2*k]) + int32(a.bsums[2*k+1]))
				}
				kLanes(&s, &wv, &sc, &a.q)
				(*laneAcc)(acc[32*v+8*h:32*v+8*h+8]).step(a.d*f16At(blk), &s)
				dmin := -a.d * f16At(blk[2:])
				for i := 0; i < 4; i++ {
					acc[32*v+16+4*h+i] = fmaF(dmin, float32(sm), acc[32*v+16+4*h+i])
				}
			}
		}
	}
}

// q2kTileGo is two rows of a Q2_K matrix (w, w[rb:]; nb blocks each)
// against n vectors' Q8_K blocks (act[v*astride:]): acc[16v+8h:16v+8h+8]
// are the eight lanes of row h and vector v, stepping block by block as
// dotQ2K's do. The twin of q2kTileAVX512.
func q2kTileGo(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*q2KBytes]
		for v := 0; v < n; v++ {
			la := (*laneAcc)(acc[16*v+8*h : 16*v+8*h+8])
			for b := 0; b < nb; b++ {
				q2KStep(la, row[b*q2KBytes:(b+1)*q2KBytes], &act[v*astride+b])
			}
		}
	}
}

// q5_0TileGo is four rows of a Q5_0 matrix (w, then every rb bytes; nb
// blocks each) against n vectors' Q8_0 blocks (act[v*astride:]):
// acc[32v+8h:32v+8h+8] are the eight lanes of row h and vector v,
// stepping block by block as dotLegacyQ8's do. The twin of
// q5_0TileAVX512.
func q5_0TileGo(w []byte, rb int, act []q8Act, astride, nb, n int, acc []float32) {
	var lv [32]int8
	var s [8]int32
	for h := 0; h < 4; h++ {
		row := w[h*rb : h*rb+nb*q5_0Bytes]
		for b := 0; b < nb; b++ {
			blk := row[b*q5_0Bytes : (b+1)*q5_0Bytes]
			unpackLegacy(Q5_0, &lv, blk)
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				lanes32(&s, &lv, a.q[:])
				(*laneAcc)(acc[32*v+8*h:32*v+8*h+8]).step(f16At(blk)*a.d, &s)
			}
		}
	}
}

// q8_1TileGo is four rows of a Q4_1 or Q5_1 matrix (w, then every rb
// bytes; nb blocks each) against n vectors' Q8_1 blocks (act[v*astride:],
// their d*sum(q) in s[v*astride:]): acc[36v+8h:36v+8h+8] are the eight
// lanes of row h and vector v, acc[36v+32+h] its summs, stepping block by
// block as dotLegacyQ8_1's do. The twin of q4_1TileAVX512 and
// q5_1TileAVX512.
func q8_1TileGo(t DType, w []byte, rb int, act []q8Act, s []float32, astride, nb, n int, acc []float32) {
	bb := t.BlockBytes()
	var lv [32]int8
	var ls [8]int32
	for h := 0; h < 4; h++ {
		row := w[h*rb : h*rb+nb*bb]
		for b := 0; b < nb; b++ {
			blk := row[b*bb : (b+1)*bb]
			unpackLegacy(t, &lv, blk)
			for v := 0; v < n; v++ {
				a := &act[v*astride+b]
				acc[36*v+32+h] = fmaF(f16At(blk[2:]), s[v*astride+b], acc[36*v+32+h])
				lanes32(&ls, &lv, a.q[:])
				(*laneAcc)(acc[36*v+8*h:36*v+8*h+8]).step(f16At(blk)*a.d, &ls)
			}
		}
	}
}

// q3kTileGo is two rows of a Q3_K matrix (w, w[rb:]; nb blocks each)
// against n vectors' Q8_K blocks (act[v*astride:]): acc[16v+8h:16v+8h+8]
// are the eight lanes of row h and vector v, stepping block by block as
// dotQ3K's do. The twin of q3kTileAVX512.
func q3kTileGo(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*q3KBytes]
		for v := 0; v < n; v++ {
			la := (*laneAcc)(acc[16*v+8*h : 16*v+8*h+8])
			for b := 0; b < nb; b++ {
				q3KStep(la, row[b*q3KBytes:(b+1)*q3KBytes], &act[v*astride+b])
			}
		}
	}
}

// iq4xsTileGo is q3kTileGo for IQ4_XS (dotIQ4XS's steps). The twin of
// iq4xsTileAVX512.
func iq4xsTileGo(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32) {
	for h := 0; h < 2; h++ {
		row := w[h*rb : h*rb+nb*iq4XSBytes]
		for v := 0; v < n; v++ {
			la := (*laneAcc)(acc[16*v+8*h : 16*v+8*h+8])
			for b := 0; b < nb; b++ {
				iq4XSStep(la, row[b*iq4XSBytes:(b+1)*iq4XSBytes], &act[v*astride+b])
			}
		}
	}
}

// q5_0Rows computes rows [lo,hi) of a Q5_0 product for several vectors,
// four rows at a time in a register tile (q5_0Tile: AVX-512 or AVX2), with
// dotLegacyQ8's bits; rows past the last four go vector by vector.
func (j *mmJob) q5_0Rows(worker, lo, hi int) {
	m, n := j.m, j.n
	nb, rb := m.Cols/q8Block, m.rowBytes()
	acc := growF32(&j.kAcc[worker], 32*n)
	r := lo
	for ; r+4 <= hi; r += 4 {
		clear(acc)
		q5_0Tile(m.Data[r*rb:(r+4)*rb], rb, j.actQ, nb, nb, n, acc)
		for v := 0; v < n; v++ {
			for h := 0; h < 4; h++ {
				j.dst[v*m.Rows+r+h] = (*laneAcc)(acc[32*v+8*h : 32*v+8*h+8]).sum()
			}
		}
	}
	for ; r < hi; r++ {
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = dotLegacyQ8Row(Q5_0, m.Data[r*rb:(r+1)*rb], j.actQ[v*nb:(v+1)*nb])
		}
	}
}

// q8_1Rows computes rows [lo,hi) of a Q4_1 or Q5_1 product for several
// vectors, four rows at a time in a register tile (q8_1Tile: AVX-512 or
// AVX2), with dotLegacyQ8_1's bits; rows past the last four go vector by
// vector.
func (j *mmJob) q8_1Rows(worker, lo, hi int) {
	m, n := j.m, j.n
	nb, rb := m.Cols/q8Block, m.rowBytes()
	acc := growF32(&j.kAcc[worker], 36*n)
	r := lo
	for ; r+4 <= hi; r += 4 {
		clear(acc)
		q8_1Tile(m.Type, m.Data[r*rb:(r+4)*rb], rb, j.actQ, j.actS, nb, nb, n, acc)
		for v := 0; v < n; v++ {
			for h := 0; h < 4; h++ {
				j.dst[v*m.Rows+r+h] = (*laneAcc)(acc[36*v+8*h:36*v+8*h+8]).sum() + acc[36*v+32+h]
			}
		}
	}
	for ; r < hi; r++ {
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = dotLegacyQ8_1Row(m.Type, m.Data[r*rb:(r+1)*rb], j.actQ[v*nb:(v+1)*nb], j.actS[v*nb:(v+1)*nb])
		}
	}
}

// kPairRows computes rows [lo,hi) of a Q3_K or IQ4_XS product for
// several vectors, two rows at a time in a register tile (tile: q3kTile,
// iq4xsTile; AVX-512 or AVX2), with the bits of dot (the row function); a
// last odd row goes vector by vector.
func (j *mmJob) kPairRows(worker, lo, hi int, tile func(w []byte, rb int, act []q8KAct, astride, nb, n int, acc []float32), dot func([]byte, []q8KAct) float32) {
	m, n := j.m, j.n
	nb, rb := m.Cols/qkK, m.rowBytes()
	acc := growF32(&j.kAcc[worker], 16*n)
	r := lo
	for ; r+2 <= hi; r += 2 {
		clear(acc)
		tile(m.Data[r*rb:(r+2)*rb], rb, j.actK, nb, nb, n, acc)
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = (*laneAcc)(acc[16*v : 16*v+8]).sum()
			j.dst[v*m.Rows+r+1] = (*laneAcc)(acc[16*v+8 : 16*v+16]).sum()
		}
	}
	for ; r < hi; r++ {
		for v := 0; v < n; v++ {
			j.dst[v*m.Rows+r] = dot(m.Data[r*rb:(r+1)*rb], j.actK[v*nb:(v+1)*nb])
		}
	}
}
