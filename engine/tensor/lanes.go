package tensor

// Lane-major blocks for the batched F16 and BF16 products. The canonical
// float order (kernels.go) gives lane k the columns j with j%8 == k, so a
// row or vector of cols values is stored lane after lane: lane k holds
// elements k, k+8, k+16, ... contiguously. With that layout one lane of
// several rows and vectors runs as one tight loop of independent
// accumulators (four rows by two vectors: eight), which reads each weight
// once per two vectors and each activation once per four rows, instead of
// eight accumulators for one dot product that reload everything. Every
// lane still adds its products in increasing j, and the lanes are added by
// hsum8, so the results are dotExact's bit for bit.

// laneSpan is where lane k of a row of cols values starts in lane-major
// order, and how many values it holds.
func laneSpan(cols, k int) (off, n int) {
	q, r := cols/8, cols%8
	return k*q + min(k, r), q + boolInt(k < r)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// toLanes stores src in lane-major order in dst (both len(src) long).
func toLanes(dst, src []float32) {
	cols := len(src)
	dst = dst[:cols]
	for k := 0; k < 8; k++ {
		off, n := laneSpan(cols, k)
		d := dst[off : off+n]
		for i := range d {
			d[i] = src[8*i+k]
		}
	}
}

// widenLanesF16 and widenLanesBF16 decode rows of cols values into dst,
// each row in lane-major order.
func widenLanesF16(dst []float32, w []uint16, cols int) {
	tab := f16Table
	for r := 0; r+cols <= len(w); r += cols {
		src := w[r : r+cols]
		for k := 0; k < 8; k++ {
			off, n := laneSpan(cols, k)
			d := dst[r+off : r+off+n]
			for i := range d {
				d[i] = tab[src[8*i+k]]
			}
		}
	}
}

func widenLanesBF16(dst []float32, w []uint16, cols int) {
	for r := 0; r+cols <= len(w); r += cols {
		src := w[r : r+cols]
		for k := 0; k < 8; k++ {
			off, n := laneSpan(cols, k)
			d := dst[r+off : r+off+n]
			for i := range d {
				d[i] = bf16(src[8*i+k])
			}
		}
	}
}

// exact4x2 is dotExact of the lane-major rows w0..w3 with the lane-major
// vectors x0 and x1: s[2*r+v] = w_r · x_v.
func exact4x2(w0, w1, w2, w3, x0, x1 []float32) (s [8]float32) {
	cols := len(w0)
	var lanes [8][8]float32 // [output][lane]
	for k := 0; k < 8; k++ {
		off, n := laneSpan(cols, k)
		a0 := w0[off : off+n]
		a1 := w1[off : off+n][:len(a0)]
		a2 := w2[off : off+n][:len(a0)]
		a3 := w3[off : off+n][:len(a0)]
		p := x0[off : off+n][:len(a0)]
		q := x1[off : off+n][:len(a0)]
		var c00, c01, c10, c11, c20, c21, c30, c31 float32
		for i, wa := range a0 {
			xp, xq := p[i], q[i]
			c00 += float32(wa * xp)
			c01 += float32(wa * xq)
			wb := a1[i]
			c10 += float32(wb * xp)
			c11 += float32(wb * xq)
			wc := a2[i]
			c20 += float32(wc * xp)
			c21 += float32(wc * xq)
			wd := a3[i]
			c30 += float32(wd * xp)
			c31 += float32(wd * xq)
		}
		lanes[0][k], lanes[1][k], lanes[2][k], lanes[3][k] = c00, c01, c10, c11
		lanes[4][k], lanes[5][k], lanes[6][k], lanes[7][k] = c20, c21, c30, c31
	}
	for o := range s {
		l := &lanes[o]
		s[o] = hsum8(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
	}
	return s
}

// exact1x1 is dotExact of a lane-major row and vector.
func exact1x1(w, x []float32) float32 {
	cols := len(w)
	var lanes [8]float32
	for k := 0; k < 8; k++ {
		off, n := laneSpan(cols, k)
		a := w[off : off+n]
		p := x[off : off+n][:len(a)]
		var c float32
		for i, wa := range a {
			c += float32(wa * p[i])
		}
		lanes[k] = c
	}
	return hsum8(lanes[0], lanes[1], lanes[2], lanes[3], lanes[4], lanes[5], lanes[6], lanes[7])
}

// exactRowsLanes computes rows [lo,hi) of a widened F16 or BF16 matrix,
// whose rows lo..hi-1 are w, for n vectors x, rows and vectors lane-major:
// dst[v*rows+r] = dotExact(row r, vector v) in natural order.
func exactRowsLanes(dst, w, x []float32, lo, hi, cols, rows, n int) {
	row := func(r int) []float32 { return w[(r-lo)*cols : (r-lo+1)*cols] }
	vec := func(v int) []float32 { return x[v*cols : (v+1)*cols] }
	r := lo
	for ; r+4 <= hi; r += 4 {
		w0, w1, w2, w3 := row(r), row(r+1), row(r+2), row(r+3)
		for v := 0; v < n; v += 2 {
			v1 := min(v+1, n-1) // an odd last vector is paired with itself
			s := exact4x2(w0, w1, w2, w3, vec(v), vec(v1))
			for i := 0; i < 4; i++ {
				dst[v*rows+r+i] = s[2*i]
				dst[v1*rows+r+i] = s[2*i+1]
			}
		}
	}
	for ; r < hi; r++ {
		wr := row(r)
		for v := 0; v < n; v++ {
			dst[v*rows+r] = exact1x1(wr, vec(v))
		}
	}
}
