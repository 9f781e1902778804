package state

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/model"
)

// disk is a cache's persistence: the index of what the segment files hold
// and the writer goroutine that appends to them. The index is guarded by
// the cache's mutex; only the writer goroutine changes the files.
type disk struct {
	c        *Cache
	dir      string
	fp       string
	max      int64
	segBytes int64 // a segment is closed once it reaches this size
	hdrBytes int64 // of a segment header: a segment this size holds no record
	// refreshEvery spaces the rewrites of a snapshot in use (tests set 0).
	refreshEvery time.Duration
	log          zerolog.Logger
	lock         *os.File
	queue        chan writeJob
	done         chan struct{}
	restored     chan struct{} // closed when the scan at Open is over
	stop         chan struct{} // closed by close: the scan stops early
	sendMu       sync.RWMutex  // blocking sends (clear, flush) vs close

	// Guarded by c.mu.
	closed      bool
	pages       map[Hash]diskLoc
	groups      map[Hash][]*diskSnap
	nsnaps      int
	kvOnly      bool
	segs        []*segment // oldest first; the last may be the one being written
	bytes       int64      // sum of segs' sizes
	st          Stats      // disk counters
	scanFrom    time.Time  // when the scan began
	scanDur     time.Duration
	queuedBytes int64 // of the jobs in the queue
	maxQueued   int64
	// warnedSize: a snapshot too large for the disk budget was logged.
	warnedSize bool

	// Writer goroutine only.
	cur           *os.File
	curSeg        *segment
	nextID        int
	unsynced      bool
	unsyncedBytes int64
}

type segment struct {
	id      int
	size    int64
	foreign bool // another fingerprint, or a header that cannot be read
	empty   bool // found at Open holding no record; deleted once the scan is over
}

// diskSnap is a snapshot record in the index.
type diskSnap struct {
	loc   diskLoc
	group Hash
	pos   int
	pages []Hash
	tail  []int32
	bad   bool // failed to load; ignored until its segment goes
}

// writeJob is a published snapshot for the writer; clear and flush jobs
// carry a channel to close when done.
type writeJob struct {
	pages []Hash
	tail  []int32
	snap  model.Snapshot
	bytes int64 // what the write adds (pages not on disk, own parts)
	clear chan struct{}
	flush chan struct{}
}

func openDisk(c *Cache, opt Options) (*disk, error) {
	if opt.MaxDiskBytes <= 0 {
		return nil, fmt.Errorf("state: cache dir %s: MaxDiskBytes must be > 0, got %d", opt.Dir, opt.MaxDiskBytes)
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: cache dir: %w", err)
	}
	lock, err := lockDir(opt.Dir)
	if err != nil {
		return nil, err
	}
	ids, err := listSegments(opt.Dir)
	if err != nil {
		unlockDir(lock)
		return nil, fmt.Errorf("state: cache dir: %w", err)
	}
	d := &disk{
		c: c, dir: opt.Dir, fp: opt.Fingerprint, max: opt.MaxDiskBytes, log: opt.Log, lock: lock,
		queue: make(chan writeJob, queueLen), done: make(chan struct{}), restored: make(chan struct{}), stop: make(chan struct{}),
		pages: map[Hash]diskLoc{}, groups: map[Hash][]*diskSnap{},
	}
	d.segBytes = min(max(d.max/8, 64<<10), 1<<30)
	d.hdrBytes = int64(len(appendSegHeader(nil, d.fp)))
	d.refreshEvery = refreshEvery
	d.maxQueued = max(opt.MaxBytes/4, 64<<20)
	d.nextID = 1
	if len(ids) > 0 {
		d.nextID = ids[len(ids)-1] + 1
	}
	// Every existing segment counts against the budget from the start.
	for _, id := range ids {
		fi, err := os.Stat(filepath.Join(d.dir, segName(id)))
		if err != nil {
			continue
		}
		d.segs = append(d.segs, &segment{id: id, size: fi.Size(), foreign: true})
		d.bytes += fi.Size()
	}
	d.st.Restoring = len(ids) > 0
	d.scanFrom = time.Now()
	go d.restore(ids)
	go d.run()
	return d, nil
}

func (d *disk) path(id int) string { return filepath.Join(d.dir, segName(id)) }

// addSnap indexes s, replacing an older record of the same snapshot. It
// reports whether s is a new snapshot. Called with c.mu held.
func (d *disk) addSnap(s *diskSnap) bool {
	g := d.groups[s.group]
	for i, o := range g {
		if o.pos == s.pos && equalTokens(o.tail, s.tail) {
			if newer(s.loc, o.loc) || o.bad {
				g[i] = s
			}
			return false
		}
	}
	d.groups[s.group] = append(g, s)
	d.nsnaps++
	return true
}

// findSnap returns the indexed record of a snapshot, or nil. Called with
// c.mu held.
func (d *disk) findSnap(group Hash, pos int, tail []int32) *diskSnap {
	for _, s := range d.groups[group] {
		if s.pos == pos && equalTokens(s.tail, tail) {
			return s
		}
	}
	return nil
}

// old reports whether segment id is in the older half of the segments:
// the next to be deleted. Called with c.mu held.
func (d *disk) old(id int) bool {
	for i, s := range d.segs {
		if s.id == id {
			return i < len(d.segs)/2
		}
	}
	return true
}

// newer reports whether a was written after b.
func newer(a, b diskLoc) bool {
	return a.seg > b.seg || a.seg == b.seg && a.off > b.off
}

func (d *disk) pagesLoc(h Hash) diskLoc {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.pages[h]
}

// flush waits until the writer has written and synced what is queued (tests).
func (d *disk) flush() {
	d.sendMu.RLock()
	defer d.sendMu.RUnlock()
	d.c.mu.Lock()
	closed := d.closed
	d.c.mu.Unlock()
	if closed {
		return
	}
	done := make(chan struct{})
	d.queue <- writeJob{flush: done}
	<-done
}

func (d *disk) close() error {
	d.sendMu.Lock()
	d.c.mu.Lock()
	if d.closed {
		d.c.mu.Unlock()
		d.sendMu.Unlock()
		return nil
	}
	d.closed = true
	close(d.stop)
	close(d.queue)
	d.c.mu.Unlock()
	d.sendMu.Unlock()
	<-d.done
	<-d.restored
	unlockDir(d.lock)
	return nil
}

// stats adds the disk figures to s. Called with c.mu held.
func (d *disk) stats(s *Stats) {
	s.DiskEntries = d.nsnaps
	s.DiskPages = len(d.pages)
	s.DiskBytes = d.bytes
	s.MaxDiskBytes = d.max
	s.DiskSegments = len(d.segs)
	s.Restoring = d.st.Restoring
	s.RestoredEntries = d.st.RestoredEntries
	s.RestoredBytes = d.st.RestoredBytes
	s.RestoreSeconds = d.scanDur.Seconds()
	if d.st.Restoring {
		s.RestoreSeconds = time.Since(d.scanFrom).Seconds()
	}
	s.SkippedRecords = d.st.SkippedRecords
	s.SkippedSegments = d.st.SkippedSegments
	s.QueuedWrites = len(d.queue)
	s.DroppedWrites = d.st.DroppedWrites
	s.WriteErrors = d.st.WriteErrors
	s.PersistFailing = d.st.PersistFailing
	s.PersistError = d.st.PersistError
	s.PersistErrorAt = d.st.PersistErrorAt
}
