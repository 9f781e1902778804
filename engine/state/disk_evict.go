// Eviction: deleting segments, foreign and oldest first, to keep the files
// within their budget, forwarding the pages other snapshots still need;
// and clearing them all.

package state

import (
	"errors"
	"os"
	"slices"
)

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
