package state

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/edgellmd/edgellmd/engine/model"
)

// PageSize is the number of tokens in a page: the unit of the hash chain
// and of the KV rows snapshots share.
const PageSize = 64

// Hash identifies a token prefix.
type Hash [sha256.Size]byte

// Chain returns the chained hashes of the full pages of tokens: Chain(t)[i]
// covers tokens [0, (i+1)*PageSize).
func Chain(tokens []int32) []Hash {
	n := len(tokens) / PageSize
	out := make([]Hash, n)
	var prev Hash
	buf := make([]byte, len(prev)+4*PageSize)
	for i := 0; i < n; i++ {
		copy(buf, prev[:])
		for j, t := range tokens[i*PageSize : (i+1)*PageSize] {
			binary.LittleEndian.PutUint32(buf[len(prev)+4*j:], uint32(t))
		}
		prev = sha256.Sum256(buf)
		out[i] = prev
	}
	return out
}

// Stats are the cache's counters.
type Stats struct {
	Entries   int   // snapshots held
	Pages     int   // shared KV pages held
	Bytes     int64 // memory held by pages and snapshots
	MaxBytes  int64
	Lookups   int64
	Hits      int64
	HitTokens int64 // prompt tokens restored rather than prefilled
	Published int64
	Evicted   int64 // snapshots evicted to stay within MaxBytes
}

// Cache is a prefix cache bounded by bytes. Its methods are safe for
// concurrent use (the engine worker publishes and looks up; metrics read
// Stats).
type Cache struct {
	mu     sync.Mutex
	max    int64
	bytes  int64
	pages  map[Hash]*page
	groups map[Hash][]*entry // by the hash of the last full page before the position (zero: none)
	lru    *list.List        // of *entry, most recent first
	// kvOnly is set once a snapshot without recurrent state was published
	// (an attention-only model): then any held run of pages is a snapshot.
	kvOnly bool
	stats  Stats
}

type page struct {
	rows *model.KVRows
	refs int
}

type entry struct {
	group Hash
	pos   int
	tail  []int32 // tokens after the last full page
	pages []Hash
	snap  model.Snapshot
	own   int64 // bytes of the tail rows and recurrent state
	elem  *list.Element
}

// New returns a cache that holds at most maxBytes.
func New(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, pages: map[Hash]*page{}, groups: map[Hash][]*entry{}, lru: list.New()}
}

// Lookup returns the snapshot of the longest prefix of tokens[:limit] that
// the cache holds, or ok false. The snapshot is read-only: restore it into
// a state (model.State.Restore).
func (c *Cache) Lookup(tokens []int32, limit int) (sn model.Snapshot, ok bool) {
	limit = min(limit, len(tokens))
	chain := Chain(tokens[:limit])
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Lookups++
	for k := len(chain); k >= 0; k-- {
		var key Hash
		if k > 0 {
			key = chain[k-1]
		}
		var best *entry
		for _, e := range c.groups[key] {
			if e.pos > limit || (best != nil && e.pos <= best.pos) {
				continue
			}
			if equalTokens(e.tail, tokens[k*PageSize:e.pos]) {
				best = e
			}
		}
		if best != nil {
			c.lru.MoveToFront(best.elem)
			c.stats.Hits++
			c.stats.HitTokens += int64(best.pos)
			return best.snap, true
		}
		if c.kvOnly && k > 0 && c.pages[chain[k-1]] != nil {
			// Attention KV can be cut anywhere: the first k pages are a
			// snapshot of their own (every snapshot holding page k-1 holds
			// the pages before it too).
			sn := model.Snapshot{Len: k * PageSize, KV: make([]*model.KVRows, k)}
			for i := range sn.KV {
				sn.KV[i] = c.pages[chain[i]].rows
			}
			c.stats.Hits++
			c.stats.HitTokens += int64(sn.Len)
			return sn, true
		}
	}
	return model.Snapshot{}, false
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// find returns the snapshot of exactly tokens (whose page chain is chain),
// or nil.
func (c *Cache) find(tokens []int32, chain []Hash) *entry {
	var key Hash
	if len(chain) > 0 {
		key = chain[len(chain)-1]
	}
	for _, e := range c.groups[key] {
		if e.pos == len(tokens) && equalTokens(e.tail, tokens[len(chain)*PageSize:]) {
			return e
		}
	}
	return nil
}

// Publish stores a snapshot of st, whose committed tokens are tokens
// (len(tokens) == st.Len()). Pages the cache already holds are shared,
// not copied. A snapshot larger than the whole budget is not stored. It
// returns whether a new snapshot was stored.
func (c *Cache) Publish(tokens []int32, st model.State) (bool, error) {
	if len(tokens) != st.Len() {
		return false, fmt.Errorf("state: publish %d tokens of a sequence of %d", len(tokens), st.Len())
	}
	if len(tokens) == 0 || c.max <= 0 {
		return false, nil
	}
	chain := Chain(tokens)
	c.mu.Lock()
	if e := c.find(tokens, chain); e != nil {
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		return false, nil
	}
	rows := make([]*model.KVRows, len(chain))
	have := make([]bool, len(chain))
	for i, h := range chain {
		if p := c.pages[h]; p != nil {
			rows[i], have[i] = p.rows, true
		}
	}
	c.mu.Unlock()

	// Copy what is missing outside the lock.
	var newBytes int64
	for i := range chain {
		if have[i] {
			continue
		}
		r, err := st.CopyKV(i*PageSize, (i+1)*PageSize)
		if err != nil {
			return false, fmt.Errorf("state: publish: %w", err)
		}
		rows[i] = r
		newBytes += r.Bytes()
	}
	sn, err := st.SnapshotWith(rows)
	if err != nil {
		return false, fmt.Errorf("state: publish: %w", err)
	}
	own := sn.Bytes()
	for _, r := range rows {
		own -= r.Bytes()
	}
	if newBytes+own > c.max {
		return false, nil
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.find(tokens, chain); e != nil { // published meanwhile
		c.lru.MoveToFront(e.elem)
		return false, nil
	}
	e := &entry{pos: len(tokens), tail: append([]int32(nil), tokens[len(chain)*PageSize:]...), pages: chain, own: own}
	if len(chain) > 0 {
		e.group = chain[len(chain)-1]
	}
	for i, h := range chain {
		p := c.pages[h]
		if p == nil {
			p = &page{rows: rows[i]}
			c.pages[h] = p
			c.bytes += rows[i].Bytes()
		}
		// Share the held page even if this call copied it too.
		sn.KV[i] = p.rows
		p.refs++
	}
	e.snap = sn
	if sn.Recurrent == nil {
		c.kvOnly = true
	}
	c.bytes += own
	e.elem = c.lru.PushFront(e)
	c.groups[e.group] = append(c.groups[e.group], e)
	c.stats.Published++
	for c.bytes > c.max && c.lru.Len() > 0 {
		c.evict(c.lru.Back().Value.(*entry))
		c.stats.Evicted++
	}
	return true, nil
}

// evict drops e and the pages no other snapshot refers to.
func (c *Cache) evict(e *entry) {
	c.lru.Remove(e.elem)
	g := c.groups[e.group]
	for i, x := range g {
		if x == e {
			g = append(g[:i], g[i+1:]...)
			break
		}
	}
	if len(g) == 0 {
		delete(c.groups, e.group)
	} else {
		c.groups[e.group] = g
	}
	c.bytes -= e.own
	for _, h := range e.pages {
		p := c.pages[h]
		if p.refs--; p.refs == 0 {
			c.bytes -= p.rows.Bytes()
			delete(c.pages, h)
		}
	}
}

// Clear drops everything.
func (c *Cache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		c.evict(c.lru.Back().Value.(*entry))
	}
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = c.lru.Len()
	s.Pages = len(c.pages)
	s.Bytes = c.bytes
	s.MaxBytes = c.max
	return s
}
