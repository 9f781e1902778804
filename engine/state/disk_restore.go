// Restore: the scan of the segments found at Open, which indexes their
// records, and the preload of the newest snapshots into memory.

package state

import (
	"errors"
	"sort"
	"time"
)

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
