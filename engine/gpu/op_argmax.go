package gpu

// Argmax records dst[i] = the index (int32) of the largest of the vocab
// logits of row i, for rows rows, as engine/sample's Argmax picks it: the
// lowest index on ties; a NaN never wins, except in column 0, where it
// wins the row. One workgroup a row.
func (r *Recorder) Argmax(dst Range, logits Range, rows, vocab int) {
	if rows <= 0 || vocab <= 0 || !r.ewCheck("Argmax", "dst", dst, 4*int64(rows)) ||
		!r.ewCheck("Argmax", "logits", logits, 4*int64(rows)*int64(vocab)) {
		return
	}
	r.Dispatch("argmax", nil, Groups(rows), []uint32{uint32(rows), uint32(vocab), ewWord(dst), ewWord(logits)},
		dst.Buf.All(), logits.Buf.All())
}
