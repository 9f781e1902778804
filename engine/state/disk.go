package state

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/engine/model"
)

// queueLen bounds the publishes waiting for the writer. A job holds
// pointers to immutable rows, mostly shared with the memory cache.
const queueLen = 64

// Batched fsync: at most syncDelay after a write, or once syncBytes wait.
const (
	syncDelay = time.Second
	syncBytes = 64 << 20
	// refreshEvery spaces the rewrites of a snapshot in use.
	refreshEvery = 10 * time.Second
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

// run is the writer goroutine. It writes from the start, while restore
// scans the older segments; it deletes segments only once the scan is over.
func (d *disk) run() {
	defer close(d.done)
	restored := d.restored
	canEvict := false
	scanned := func() {
		restored, canEvict = nil, true
		d.dropEmpty()
		d.evict()
	}
	// Records reach the OS at once (a killed process loses nothing it
	// wrote); fsync, against power loss, is batched: at most syncDelay
	// after a write, and whenever syncBytes are waiting.
	var tick <-chan time.Time
	for {
		select {
		case <-restored:
			scanned()
		case j, ok := <-d.queue:
			if !ok {
				d.closeSegment()
				return
			}
			// A job that waited with the end of the scan sees its cleanup
			// (a flush after WaitRestored finds it done).
			select {
			case <-restored:
				scanned()
			default:
			}
			switch {
			case j.clear != nil:
				<-d.restored // the scan adds to the index of what it deletes
				d.clearFiles()
				close(j.clear)
			case j.flush != nil:
				d.sync()
				close(j.flush)
			default:
				d.write(j)
				d.c.mu.Lock()
				d.queuedBytes -= j.bytes
				d.c.mu.Unlock()
			}
			if canEvict {
				d.evict()
			}
			if d.unsyncedBytes >= syncBytes {
				d.sync()
			}
			if d.unsynced && tick == nil {
				tick = time.After(syncDelay)
			}
		case <-tick:
			tick = nil
			d.sync()
		}
	}
}

// restore scans the segments found at Open, oldest first, and indexes
// their good records; snapshots become visible as soon as their pages are
// all indexed.
func (d *disk) restore(ids []int) {
	defer func() {
		d.c.mu.Lock()
		d.st.Restoring = false
		d.scanDur = time.Since(d.scanFrom)
		d.c.mu.Unlock()
		close(d.restored)
	}()
	var pending []*diskSnap
	for _, id := range ids {
		select {
		case <-d.stop:
			return
		default:
		}
		var snaps []*diskSnap
		type pg struct {
			h   Hash
			loc diskLoc
		}
		var pages []pg
		var bad int
		kvOnly := false
		fp, st, err := scanSegment(d.path(id), id, func(typ byte, p []byte, loc diskLoc) {
			switch typ {
			case recPage:
				if len(p) < len(Hash{}) {
					bad++
					return
				}
				var h Hash
				copy(h[:], p)
				pages = append(pages, pg{h, loc})
			case recSnap:
				m, err := parseSnap(p)
				if err != nil {
					bad++
					return
				}
				if m.rec == nil {
					kvOnly = true
				}
				s := &diskSnap{loc: loc, pos: m.pos, pages: m.pages, tail: m.tail}
				if len(m.pages) > 0 {
					s.group = m.pages[len(m.pages)-1]
				}
				snaps = append(snaps, s)
			default:
				bad++
			}
		})
		switch {
		case errors.Is(err, errTornHeader) || err == nil && st.records == 0 && st.damaged == 0 && st.truncated == 0:
			// Nothing to read and nothing to warn about: a segment whose
			// creation or first write failed. The writer deletes it.
			d.c.mu.Lock()
			for _, s := range d.segs {
				if s.id == id {
					s.empty = true
				}
			}
			d.c.mu.Unlock()
			continue
		case err != nil && fp == "":
			d.log.Warn().Err(err).Str("segment", d.path(id)).Msg("prefix cache: unreadable segment skipped")
			d.countSkippedSegment()
			continue
		case fp != d.fp:
			d.log.Warn().Str("segment", d.path(id)).Str("fingerprint", fp).Str("want", d.fp).
				Msg("prefix cache: segment of another model or format skipped")
			d.countSkippedSegment()
			continue
		case err != nil:
			d.log.Warn().Err(err).Str("segment", d.path(id)).Msg("prefix cache: segment read error; keeping the records before it")
		}
		if st.damaged > 0 || bad > 0 || st.truncated > 0 {
			d.log.Warn().Str("segment", d.path(id)).Int("damaged", st.damaged).Int("inconsistent", bad).
				Int64("truncated_bytes", st.truncated).Msg("prefix cache: damaged records skipped")
		}
		d.c.mu.Lock()
		for _, s := range d.segs {
			if s.id == id {
				s.foreign = false
			}
		}
		d.st.SkippedRecords += int64(st.damaged + bad)
		if st.truncated > 0 {
			d.st.SkippedRecords++
		}
		d.st.RestoredBytes += st.goodBytes
		d.kvOnly = d.kvOnly || kvOnly
		for _, p := range pages {
			if old, ok := d.pages[p.h]; !ok || newer(p.loc, old) {
				d.pages[p.h] = p.loc // a copy forwarded or written since wins
			}
		}
		pending = append(pending, snaps...)
		pending = d.resolve(pending)
		d.c.mu.Unlock()
	}
	d.c.mu.Lock()
	d.st.SkippedRecords += int64(len(pending))
	d.c.mu.Unlock()
	if len(pending) > 0 {
		d.log.Warn().Int("snapshots", len(pending)).Msg("prefix cache: snapshots whose pages are missing skipped")
	}
	n, bytes := d.preload()
	d.c.mu.Lock()
	d.log.Info().Int("snapshots", d.st.RestoredEntries).Int64("bytes", d.st.RestoredBytes).
		Int("in_memory", n).Int64("memory_bytes", bytes).
		Dur("took_ms", time.Since(d.scanFrom)).Msg("prefix cache: restored from disk")
	d.c.mu.Unlock()
}

// preload reads the newest snapshots on disk into memory while they fit
// its budget (evicting nothing), so the first turns after a restart are as
// fast as warm ones. It returns how many it read and the memory they took.
func (d *disk) preload() (n int, bytes int64) {
	c := d.c
	c.mu.Lock()
	var all []*diskSnap
	for _, g := range d.groups {
		all = append(all, g...)
	}
	before := c.bytes
	c.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return newer(all[i].loc, all[j].loc) })
	for _, s := range all {
		select {
		case <-d.stop:
			return n, bytes
		default:
		}
		c.mu.Lock()
		if s.bad || c.held(s.group, s.pos, s.tail) {
			c.mu.Unlock()
			continue
		}
		p := d.planPages(c, &loadPlan{snap: s, n: s.pos}, s.pages)
		need := s.loc.size // records are a little larger than what they hold
		for i, r := range p.rows {
			if r == nil {
				need += d.pages[s.pages[i]].size
			}
		}
		full := c.bytes+need > c.max
		lay := c.layout
		c.mu.Unlock()
		if full {
			break
		}
		sn, err := d.load(p, lay)
		c.mu.Lock()
		if err != nil {
			d.loadFailed(p, err)
		} else if c.insert(s.pages, s.tail, sn) != nil {
			n++
		}
		bytes = c.bytes - before
		c.mu.Unlock()
	}
	return n, bytes
}

func (d *disk) countSkippedSegment() {
	d.c.mu.Lock()
	d.st.SkippedSegments++
	d.c.mu.Unlock()
}

// resolve indexes the pending snapshots whose pages are all indexed and
// returns the others. Called with c.mu held.
func (d *disk) resolve(pending []*diskSnap) []*diskSnap {
	var left []*diskSnap
	for _, s := range pending {
		ok := true
		for _, h := range s.pages {
			if _, there := d.pages[h]; !there {
				ok = false
				break
			}
		}
		if !ok {
			left = append(left, s)
			continue
		}
		if d.addSnap(s) {
			d.st.RestoredEntries++
		}
	}
	return left
}

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

// refresh queues a rewrite of a snapshot served from memory whose record
// is gone from disk or is in a segment that will soon be deleted, so that
// what is in use stays on disk (the files are a FIFO otherwise). Called
// with c.mu held.
func (d *disk) refresh(e *entry) {
	if d.st.Restoring {
		return // the index is not complete yet
	}
	if s := d.findSnap(e.group, e.pos, e.tail); s != nil && !s.bad && !d.old(s.loc.seg) {
		return
	}
	// Once per refreshEvery at most: a queued rewrite takes a while.
	if now := time.Now(); now.Sub(e.refreshed) >= d.refreshEvery {
		e.refreshed = now
		d.enqueue(writeJob{pages: e.pages, tail: e.tail, snap: e.snap})
	}
}

// newer reports whether a was written after b.
func newer(a, b diskLoc) bool {
	return a.seg > b.seg || a.seg == b.seg && a.off > b.off
}

// enqueue hands a published snapshot to the writer, or drops it when the
// queue is full. Called with c.mu held.
func (d *disk) enqueue(j writeJob) {
	if d.closed {
		return
	}
	// What the write would add: the snapshot's own parts and its pages
	// not on disk yet.
	add := j.snap.Bytes()
	for i, h := range j.pages {
		if _, ok := d.pages[h]; ok {
			add -= j.snap.KV[i].Bytes()
		}
	}
	if add > d.max/4 {
		if !d.warnedSize {
			d.warnedSize = true
			d.log.Warn().Int64("bytes", add).Int64("max_disk_bytes", d.max).
				Msg("prefix cache: snapshot larger than a quarter of the disk budget not written")
		}
		d.st.DroppedWrites++
		return
	}
	// Queued jobs keep their rows alive even when memory evicts them:
	// bound that memory too.
	if d.queuedBytes > 0 && d.queuedBytes+add > d.maxQueued {
		d.st.DroppedWrites++
		return
	}
	j.bytes = add
	select {
	case d.queue <- j:
		d.queuedBytes += add
	default:
		d.st.DroppedWrites++
	}
}

// write appends the pages of j not on disk yet, then the snapshot record.
// A write that fails drops the publish (the pages written before stay
// indexed: they are whole records).
func (d *disk) write(j writeJob) {
	d.c.mu.Lock()
	var key Hash
	if len(j.pages) > 0 {
		key = j.pages[len(j.pages)-1]
	}
	if s := d.findSnap(key, j.snap.Len, j.tail); s != nil && !s.bad && !d.old(s.loc.seg) {
		d.c.mu.Unlock()
		return
	}
	var need []int
	for i, h := range j.pages {
		if _, ok := d.pages[h]; !ok {
			need = append(need, i)
		}
	}
	d.c.mu.Unlock()

	var buf []byte
	for _, i := range need {
		h := j.pages[i]
		rec, err := appendRecord(buf[:0], recPage, func(b []byte) ([]byte, error) {
			return model.AppendKVRows(append(b, h[:]...), j.snap.KV[i])
		})
		if err != nil {
			d.dropWrite(err)
			return
		}
		buf = rec
		loc, err := d.append(rec)
		if err != nil {
			d.dropWrite(err)
			return
		}
		d.c.mu.Lock()
		d.pages[h] = loc
		d.c.mu.Unlock()
	}
	rec, err := appendRecord(buf[:0], recSnap, func(b []byte) ([]byte, error) {
		return appendSnapPayload(b, j.snap.Len, j.pages, j.tail, j.snap)
	})
	if err != nil {
		d.dropWrite(err)
		return
	}
	loc, err := d.append(rec)
	if err != nil {
		d.dropWrite(err)
		return
	}
	s := &diskSnap{loc: loc, pos: j.snap.Len, pages: j.pages, tail: j.tail}
	if len(j.pages) > 0 {
		s.group = j.pages[len(j.pages)-1]
	}
	d.c.mu.Lock()
	d.addSnap(s)
	if j.snap.Recurrent == nil {
		d.kvOnly = true
	}
	d.c.mu.Unlock()
}

// dropWrite counts a publish that failed to reach the disk.
func (d *disk) dropWrite(err error) {
	d.c.mu.Lock()
	d.st.DroppedWrites++
	d.c.mu.Unlock()
	d.writeFailed(err)
}

// writeFailed records a failed write. It logs the first failure after a
// success and every hundredth, so a full disk does not flood the log.
func (d *disk) writeFailed(err error) {
	d.c.mu.Lock()
	d.st.WriteErrors++
	n := d.st.WriteErrors
	first := !d.st.PersistFailing
	d.st.PersistFailing = true
	d.st.PersistError = err.Error()
	d.st.PersistErrorAt = time.Now()
	d.c.mu.Unlock()
	if first || n%100 == 0 {
		d.log.Error().Err(err).Int64("errors", n).Msg("prefix cache: write failed; publishes are not persisted until writes succeed again")
	}
}

// append writes one record to the current segment, starting one when
// needed, and returns where it lies. A write that fails is cut off the
// segment, which then takes the next record (the disk may have room
// again); only when that fails too is the segment closed with its torn
// tail, which a scan skips.
func (d *disk) append(rec []byte) (diskLoc, error) {
	if d.cur == nil || d.curSeg.size >= d.segBytes {
		if err := d.startSegment(); err != nil {
			return diskLoc{}, err
		}
	}
	loc := diskLoc{seg: d.curSeg.id, off: d.curSeg.size, size: int64(len(rec))}
	n, err := d.cur.Write(rec)
	if err != nil {
		err = fmt.Errorf("state: segment: %w", err) // err names the file
		if n > 0 {
			if terr := d.cur.Truncate(loc.off); terr != nil {
				d.grow(int64(n))
				d.closeSegment()
			} else if _, serr := d.cur.Seek(loc.off, io.SeekStart); serr != nil {
				d.closeSegment()
			}
		}
		return diskLoc{}, err
	}
	d.grow(int64(n))
	d.c.mu.Lock()
	recovered := d.st.PersistFailing
	d.st.PersistFailing = false
	d.c.mu.Unlock()
	if recovered {
		d.log.Info().Msg("prefix cache: writes succeed again")
	}
	return loc, nil
}

// grow counts n bytes written to the current segment.
func (d *disk) grow(n int64) {
	d.c.mu.Lock()
	d.curSeg.size += n
	d.bytes += n
	d.c.mu.Unlock()
	d.unsynced = true
	d.unsyncedBytes += n
}

// startSegment closes the current segment and starts a new one. A segment
// whose header cannot be written is deleted at once: it would hold nothing.
func (d *disk) startSegment() error {
	d.closeSegment()
	id := d.nextID
	path := d.path(id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		d.nextID++ // the name may be taken
		return fmt.Errorf("state: new segment: %w", err)
	}
	if _, err := f.Write(appendSegHeader(nil, d.fp)); err != nil {
		f.Close()
		if rerr := os.Remove(path); rerr != nil {
			// Counted as a foreign segment, the first to go.
			d.nextID++
			d.log.Warn().Err(rerr).Msg("prefix cache: remove segment")
			if fi, serr := os.Stat(path); serr == nil {
				d.c.mu.Lock()
				d.segs = append(d.segs, &segment{id: id, size: fi.Size(), foreign: true})
				d.bytes += fi.Size()
				d.c.mu.Unlock()
			}
		}
		return fmt.Errorf("state: new segment: %w", err)
	}
	d.nextID++
	seg := &segment{id: id, size: d.hdrBytes}
	d.c.mu.Lock()
	d.segs = append(d.segs, seg)
	d.bytes += seg.size
	d.c.mu.Unlock()
	d.cur, d.curSeg = f, seg
	syncDir(d.dir)
	return nil
}

// closeSegment syncs and closes the current segment. It stays in segs
// unless it holds no record: then it is deleted.
func (d *disk) closeSegment() {
	if d.cur == nil {
		return
	}
	d.sync()
	d.cur.Close()
	seg := d.curSeg
	d.cur, d.curSeg = nil, nil
	if seg.size <= d.hdrBytes {
		d.remove([]*segment{seg})
	}
}

// remove deletes segments that no index entry refers to.
func (d *disk) remove(segs []*segment) {
	d.c.mu.Lock()
	for _, seg := range segs {
		if i := slices.Index(d.segs, seg); i >= 0 {
			d.segs = slices.Delete(d.segs, i, i+1)
			d.bytes -= seg.size
		}
	}
	d.c.mu.Unlock()
	for _, seg := range segs {
		if err := os.Remove(d.path(seg.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn().Err(err).Msg("prefix cache: remove segment")
		}
	}
	syncDir(d.dir)
}

// dropEmpty deletes the segments the scan found holding no record.
func (d *disk) dropEmpty() {
	d.c.mu.Lock()
	var empty []*segment
	for _, s := range d.segs {
		if s.empty {
			empty = append(empty, s)
		}
	}
	d.c.mu.Unlock()
	if len(empty) == 0 {
		return
	}
	d.remove(empty)
	d.log.Info().Int("segments", len(empty)).Msg("prefix cache: removed segment files that held no record (a full disk or an interrupted write left them)")
}

func (d *disk) sync() {
	if d.cur != nil && d.unsynced {
		if err := d.cur.Sync(); err != nil {
			d.log.Warn().Err(err).Msg("prefix cache: fsync failed")
		}
	}
	d.unsynced = false
	d.unsyncedBytes = 0
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// evict deletes segments, foreign ones first and then the oldest, until
// the files fit the budget. Pages of a deleted segment that snapshots in
// other segments need are copied into the current segment first.
func (d *disk) evict() {
	for {
		d.c.mu.Lock()
		if d.bytes <= d.max || len(d.segs) == 0 {
			d.c.mu.Unlock()
			return
		}
		victim := d.segs[0]
		for _, s := range d.segs {
			if s.foreign {
				victim = s
				break
			}
		}
		d.c.mu.Unlock()
		if d.curSeg == victim {
			d.closeSegment() // deletes it when it holds no record
			continue
		}
		d.dropSegment(victim)
	}
}

// dropSegment deletes one segment and its index entries, forwarding the
// pages other snapshots need.
func (d *disk) dropSegment(seg *segment) {
	d.c.mu.Lock()
	need := map[Hash]bool{}
	for _, g := range d.groups {
		for _, s := range g {
			if s.loc.seg == seg.id {
				continue
			}
			for _, h := range s.pages {
				if d.pages[h].seg == seg.id {
					need[h] = true
				}
			}
		}
	}
	d.c.mu.Unlock()
	moved := map[Hash]diskLoc{}
	for h := range need {
		loc := d.pagesLoc(h)
		typ, payload, err := readRecord(d.dir, loc)
		if err != nil || typ != recPage {
			d.log.Warn().Err(err).Msg("prefix cache: page to keep could not be read; its snapshots are dropped")
			continue
		}
		rec, _ := appendRecord(nil, recPage, func(b []byte) ([]byte, error) { return append(b, payload...), nil })
		nl, err := d.append(rec)
		if err != nil {
			d.writeFailed(err)
			continue
		}
		moved[h] = nl
	}
	d.sync() // the copies are durable before the originals go
	d.c.mu.Lock()
	for h, loc := range d.pages {
		if loc.seg == seg.id {
			if nl, ok := moved[h]; ok {
				d.pages[h] = nl
			} else {
				delete(d.pages, h)
			}
		}
	}
	for key, g := range d.groups {
		kept := g[:0]
		for _, s := range g {
			ok := s.loc.seg != seg.id
			for _, h := range s.pages {
				if _, there := d.pages[h]; !there {
					ok = false
				}
			}
			if ok {
				kept = append(kept, s)
			} else {
				d.nsnaps--
			}
		}
		if len(kept) == 0 {
			delete(d.groups, key)
		} else {
			d.groups[key] = kept
		}
	}
	for i, s := range d.segs {
		if s == seg {
			d.segs = append(d.segs[:i], d.segs[i+1:]...)
			break
		}
	}
	d.bytes -= seg.size
	d.c.mu.Unlock()
	if err := os.Remove(d.path(seg.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn().Err(err).Msg("prefix cache: remove segment")
	}
}

func (d *disk) pagesLoc(h Hash) diskLoc {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.pages[h]
}

// clearFiles deletes every segment (writer goroutine).
func (d *disk) clearFiles() {
	d.closeSegment()
	d.c.mu.Lock()
	segs := d.segs
	d.segs = nil
	d.bytes = 0
	d.pages = map[Hash]diskLoc{}
	d.groups = map[Hash][]*diskSnap{}
	d.nsnaps = 0
	d.c.mu.Unlock()
	for _, s := range segs {
		if err := os.Remove(d.path(s.id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn().Err(err).Msg("prefix cache: remove segment")
		}
	}
	syncDir(d.dir)
}

// clear drops the queued writes and deletes the files, and waits.
func (d *disk) clear() {
	d.sendMu.RLock()
	defer d.sendMu.RUnlock()
	d.c.mu.Lock()
	if d.closed {
		d.c.mu.Unlock()
		return
	}
	for len(d.queue) > 0 {
		select {
		case j := <-d.queue:
			d.queuedBytes -= j.bytes
		default:
		}
	}
	d.c.mu.Unlock()
	done := make(chan struct{})
	d.queue <- writeJob{clear: done}
	<-done
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

// loadPlan is what Lookup reads from disk: a snapshot record and the pages
// not in memory, or (attention-only models) a run of pages.
type loadPlan struct {
	snap  *diskSnap       // nil for a run of pages
	n     int             // tokens
	pages []Hash          // the snapshot's pages
	rows  []*model.KVRows // held in memory already (nil: read from disk)
	locs  []diskLoc
}

// plan returns what to read for a longer prefix than have tokens, or nil.
// Called with c.mu held.
func (d *disk) plan(c *Cache, tokens []int32, chain []Hash, limit, have int) *loadPlan {
	for k := len(chain); k >= 0 && k*PageSize+PageSize > have; k-- {
		var key Hash
		if k > 0 {
			key = chain[k-1]
		}
		var best *diskSnap
		for _, s := range d.groups[key] {
			if s.bad || s.pos > limit || s.pos <= have || (best != nil && s.pos <= best.pos) {
				continue
			}
			if equalTokens(s.tail, tokens[k*PageSize:s.pos]) {
				best = s
			}
		}
		if best != nil {
			return d.planPages(c, &loadPlan{snap: best, n: best.pos}, best.pages)
		}
		if d.kvOnly && k > 0 && k*PageSize > have {
			all := true
			for _, h := range chain[:k] {
				if _, ok := d.pages[h]; !ok {
					all = false
					break
				}
			}
			if all {
				return d.planPages(c, &loadPlan{n: k * PageSize}, chain[:k])
			}
		}
	}
	return nil
}

func (d *disk) planPages(c *Cache, p *loadPlan, pages []Hash) *loadPlan {
	p.pages = pages
	p.rows = make([]*model.KVRows, len(pages))
	p.locs = make([]diskLoc, len(pages))
	for i, h := range pages {
		if pg := c.pages[h]; pg != nil {
			p.rows[i] = pg.rows
		} else {
			p.locs[i] = d.pages[h]
		}
	}
	return p
}

// load reads what p names (without c.mu) and builds the snapshot.
func (d *disk) load(p *loadPlan, lay *model.Layout) (model.Snapshot, error) {
	sn := model.Snapshot{Len: p.n, KV: make([]*model.KVRows, 0, len(p.pages)+1)}
	for i, h := range p.pages {
		r := p.rows[i]
		if r == nil {
			typ, payload, err := readRecord(d.dir, p.locs[i])
			if err != nil {
				return model.Snapshot{}, err
			}
			if typ != recPage || len(payload) < len(h) || Hash(payload[:len(h)]) != h {
				return model.Snapshot{}, fmt.Errorf("page record at %s:%d is not page %x", segName(p.locs[i].seg), p.locs[i].off, h[:4])
			}
			if r, err = model.DecodeKVRows(payload[len(h):], lay); err != nil {
				return model.Snapshot{}, err
			}
			if r.Len() != PageSize {
				return model.Snapshot{}, fmt.Errorf("page record at %s:%d holds %d tokens", segName(p.locs[i].seg), p.locs[i].off, r.Len())
			}
		}
		sn.KV = append(sn.KV, r)
	}
	if p.snap == nil {
		return sn, nil
	}
	typ, payload, err := readRecord(d.dir, p.snap.loc)
	if err != nil {
		return model.Snapshot{}, err
	}
	if typ != recSnap {
		return model.Snapshot{}, fmt.Errorf("record at %s:%d is not a snapshot", segName(p.snap.loc.seg), p.snap.loc.off)
	}
	m, err := parseSnap(payload)
	if err != nil {
		return model.Snapshot{}, err
	}
	if m.pos != p.snap.pos || !equalTokens(m.tail, p.snap.tail) {
		return model.Snapshot{}, fmt.Errorf("snapshot record at %s:%d changed", segName(p.snap.loc.seg), p.snap.loc.off)
	}
	if m.kv != nil {
		r, err := model.DecodeKVRows(m.kv, lay)
		if err != nil {
			return model.Snapshot{}, err
		}
		if r.Len() != len(m.tail) {
			return model.Snapshot{}, fmt.Errorf("snapshot record: tail run of %d tokens for %d tail tokens", r.Len(), len(m.tail))
		}
		sn.KV = append(sn.KV, r)
	}
	if m.rec != nil {
		rc, err := model.DecodeRecurrent(m.rec, lay)
		if err != nil {
			return model.Snapshot{}, err
		}
		sn.Recurrent = rc
	}
	return sn, nil
}

// loadFailed marks what failed to load so Lookup stops offering it.
// Called with c.mu held.
func (d *disk) loadFailed(p *loadPlan, err error) {
	d.st.SkippedRecords++
	d.log.Warn().Err(err).Int("tokens", p.n).Msg("prefix cache: snapshot on disk could not be read; skipped")
	if p.snap != nil {
		p.snap.bad = true
		return
	}
	// A run of pages: forget the pages read from disk.
	for i, h := range p.pages {
		if p.rows[i] == nil {
			delete(d.pages, h)
		}
	}
}
