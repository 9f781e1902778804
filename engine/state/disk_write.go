// The writer: the goroutine that appends published snapshots to the
// current segment, rolls segments, and syncs them in batches.

package state

import (
	"fmt"
	"io"
	"os"
	"time"

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
