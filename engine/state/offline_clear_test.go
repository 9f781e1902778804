package state

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestClearDirLeavesOtherDirectoriesAlone: `edgellmd cache clear --dir`
// pointed at a directory that is not a cache (a typo, a parent folder)
// deletes nothing there and leaves no LOCK file behind.
func TestClearDirLeavesOtherDirectoriesAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, bytes, err := ClearDir(dir)
	if err != nil || files != 0 || bytes != 0 {
		t.Fatalf("ClearDir of a directory without segments: %d files, %d bytes, %v", files, bytes, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("after ClearDir the directory holds %v, want only notes.txt", names)
	}
}
