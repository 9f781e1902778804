package state

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzScanSegment: no segment body makes the scan or the snapshot parser
// panic, and every record the scan accepts passes its checksum again.
func FuzzScanSegment(f *testing.F) {
	snap, _ := appendRecord(nil, recSnap, func(b []byte) ([]byte, error) {
		return append(append(b, 70, 1), make([]byte, 32)...), nil
	})
	f.Add(snap)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(dir, segName(1))
		if err := os.WriteFile(path, append(appendSegHeader(nil, "fp"), body...), 0o644); err != nil {
			t.Fatal(err)
		}
		fp, _, err := scanSegment(path, 1, func(typ byte, p []byte, loc diskLoc) {
			parseSnap(p)
			if _, _, err := readRecord(dir, loc); err != nil {
				t.Errorf("record accepted by the scan fails on reading: %v", err)
			}
		})
		if err == nil && fp != "fp" {
			t.Errorf("fingerprint %q", fp)
		}
	})
}
