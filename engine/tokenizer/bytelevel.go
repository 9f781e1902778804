package tokenizer

// GPT-2's byte-to-unicode table (openai/gpt-2 encoder.py bytes_to_unicode):
// printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100
// onwards in byte order, so every byte has a visible, non-space character.
var byteToRune, runeToByte = func() (b2r [256]rune, r2b map[rune]byte) {
	r2b = make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			b2r[b] = rune(b)
		} else {
			b2r[b] = next
			next++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// byteLevelEncode maps raw bytes to their byte-level string.
func byteLevelEncode(s string) string {
	buf := make([]rune, 0, len(s))
	for i := 0; i < len(s); i++ {
		buf = append(buf, byteToRune[s[i]])
	}
	return string(buf)
}

// byteLevelDecode maps a byte-level token text back to raw bytes. Characters
// outside the table (not produced by byteLevelEncode) are kept as UTF-8.
func byteLevelDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeToByte[r]; ok {
			out = append(out, b)
		} else {
			out = append(out, string(r)...)
		}
	}
	return out
}
