package gguf

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
)

// Fingerprint blocks: fingerprintBlocks blocks of fingerprintBlockBytes,
// spread evenly over the tensor data (its first and last bytes included),
// are hashed besides the header: 1 MiB read whatever the file's size.
const (
	fingerprintBlocks     = 16
	fingerprintBlockBytes = 64 << 10
)

// Fingerprint identifies a GGUF file by its content, for the prefix cache
// (a persisted snapshot is restored only by the model that wrote it) and
// the API's system_fingerprint: the file's size, a SHA-256 of its header,
// metadata and tensor table (a re-quantized or converted file changes it),
// and a SHA-256 of blocks sampled over the tensor data (retrained weights of
// the same shapes change it). Not the path or the modification time: a
// copied, moved or restored file keeps its fingerprint, and its cache.
// Hashing every byte would take seconds for a large model at every start.
func Fingerprint(path string) (string, error) {
	g, err := Open(path)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	defer g.Close()
	return g.Fingerprint()
}

// Fingerprint is the Fingerprint of the file g was opened from, without
// parsing its header again (a large vocabulary makes that most of the work).
func (g *File) Fingerprint() (string, error) {
	path, header := g.Path, g.DataOffset
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, header); err != nil {
		return "", fmt.Errorf("fingerprint: %s: %w", path, err)
	}
	headerSum := h.Sum(nil)
	h.Reset()
	data := st.Size() - header
	for i := range int64(fingerprintBlocks) {
		n := min(int64(fingerprintBlockBytes), data)
		off := header
		if fingerprintBlocks > 1 {
			off += (data - n) * i / (fingerprintBlocks - 1)
		}
		if _, err := io.Copy(h, io.NewSectionReader(f, off, n)); err != nil {
			return "", fmt.Errorf("fingerprint: %s: %w", path, err)
		}
	}
	return fmt.Sprintf("model=%x size=%d data=%x", headerSum[:16], st.Size(), h.Sum(nil)[:16]), nil
}
