// Loading: what a lookup reads from disk (plan, without reading) and the
// read itself (load, without the cache's lock).

package state

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/model"
)

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
