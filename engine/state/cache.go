package state

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

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

	// On disk (zero without a Dir).
	DiskEntries     int   // snapshots indexed on disk
	DiskPages       int   // pages indexed on disk
	DiskBytes       int64 // size of the segment files, foreign ones included
	MaxDiskBytes    int64
	DiskSegments    int
	DiskHits        int64   // lookups served by reading a snapshot from disk
	DiskHitTokens   int64   // tokens of those
	Restoring       bool    // the scan of the files found at Open is still running
	RestoredEntries int     // snapshots found on disk at Open (usable ones)
	RestoredBytes   int64   // bytes of the good records found at Open
	RestoreSeconds  float64 // time the scan took (so far, while Restoring)
	SkippedRecords  int64   // damaged, truncated or inconsistent records dropped
	SkippedSegments int     // segments of another fingerprint or with a bad header
	QueuedWrites    int     // publishes waiting for the writer
	// DroppedWrites counts the publishes not written to disk: the writer's
	// queue was full, the snapshot was too large for the disk budget, or
	// writing it failed (a full disk).
	DroppedWrites int64
	WriteErrors   int64 // failed writes (a publish, a page copied forward)
	// PersistFailing: the latest write to disk failed (the next one that
	// succeeds clears it). PersistError is the last failure's error and
	// PersistErrorAt when it happened; both stay after a recovery.
	PersistFailing bool
	PersistError   string
	PersistErrorAt time.Time
}

// Options configure a cache.
type Options struct {
	MaxBytes int64 // memory budget; <= 0 stores nothing
	// Dir keeps the cache across restarts ("" = memory only), within
	// MaxDiskBytes.
	Dir          string
	MaxDiskBytes int64
	// Fingerprint names the model file, its KV type and whatever else
	// makes snapshots of one run usable by another; files of another
	// fingerprint are never read (and are deleted first when the disk
	// budget needs room).
	Fingerprint string
	// Model, when set, is the model whose states the snapshots serve:
	// records read from disk are checked against its state layout. Without
	// it the layout of the first published state is used.
	Model model.Model
	Log   zerolog.Logger
}

// Cache is a prefix cache bounded by bytes. Its methods are safe for
// concurrent use (the engine worker publishes and looks up; metrics read
// Stats).
type Cache struct {
	mu     sync.Mutex
	log    zerolog.Logger
	layout *model.Layout // nil until known
	disk   *disk         // nil without a Dir
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
	// refreshed is when a rewrite to disk was last queued (Lookup keeps
	// snapshots in use from ageing out of the files).
	refreshed time.Time
}

// New returns a cache that holds at most maxBytes, in memory only.
func New(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, pages: map[Hash]*page{}, groups: map[Hash][]*entry{}, lru: list.New(), log: zerolog.Nop()}
}

// Open returns a cache as New does and, when opt.Dir is set, persists it
// there: what is published is written to disk in the background, and what
// earlier runs wrote (of the same fingerprint) is scanned in the background
// and served to Lookup as it is found. It fails only when the directory
// cannot be made or another process holds it; bad files are skipped.
// Close it to flush the writes and release the directory.
func Open(opt Options) (*Cache, error) {
	c := New(opt.MaxBytes)
	c.log = opt.Log
	if opt.Model != nil {
		l, err := model.LayoutOf(opt.Model)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		c.layout = &l
	}
	if opt.Dir == "" {
		return c, nil
	}
	d, err := openDisk(c, opt)
	if err != nil {
		return nil, err
	}
	c.disk = d
	return c, nil
}

// Close waits for the queued writes, syncs them and releases the
// directory. The cache keeps working in memory afterwards.
func (c *Cache) Close() error {
	if c.disk == nil {
		return nil
	}
	return c.disk.close()
}

// Lookup returns the snapshot of the longest prefix of tokens[:limit] that
// the cache holds, in memory or on disk, or ok false. The snapshot is
// read-only: restore it into a state (model.State.Restore). A snapshot
// found only on disk is read (here, synchronously) and kept in memory.
func (c *Cache) Lookup(tokens []int32, limit int) (sn model.Snapshot, ok bool) {
	limit = min(limit, len(tokens))
	chain := Chain(tokens[:limit])
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Lookups++
	sn, ok = c.lookupRAM(tokens, chain, limit)
	if c.disk != nil {
		if plan := c.disk.plan(c, tokens, chain, limit, sn.Len); plan != nil {
			lay := c.layout
			c.mu.Unlock()
			dsn, err := c.disk.load(plan, lay)
			c.mu.Lock()
			if err != nil {
				c.disk.loadFailed(plan, err)
			} else {
				sn, ok = dsn, true
				c.stats.DiskHits++
				c.stats.DiskHitTokens += int64(dsn.Len)
				if plan.snap != nil {
					c.insert(plan.snap.pages, plan.snap.tail, dsn)
				}
			}
		}
	}
	if ok {
		c.stats.Hits++
		c.stats.HitTokens += int64(sn.Len)
	}
	return sn, ok
}

// lookupRAM is Lookup in memory, without the counters.
func (c *Cache) lookupRAM(tokens []int32, chain []Hash, limit int) (model.Snapshot, bool) {
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
			if c.disk != nil {
				c.disk.refresh(best)
			}
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

// held reports whether memory holds the snapshot of the prefix whose last
// full page hashes to group, of pos tokens ending in tail.
func (c *Cache) held(group Hash, pos int, tail []int32) bool {
	for _, e := range c.groups[group] {
		if e.pos == pos && equalTokens(e.tail, tail) {
			return true
		}
	}
	return false
}

// Publish stores a snapshot of st, whose committed tokens are tokens
// (len(tokens) == st.Len()). Pages the cache already holds are shared,
// not copied. A snapshot larger than the whole budget is not stored. It
// returns whether a new snapshot was stored. With a Dir, the snapshot is
// queued for the writer (dropped, and counted, when its queue is full).
func (c *Cache) Publish(tokens []int32, st model.State) (bool, error) {
	if len(tokens) != st.Len() {
		return false, fmt.Errorf("state: publish %d tokens of a sequence of %d", len(tokens), st.Len())
	}
	if len(tokens) == 0 || c.max <= 0 {
		return false, nil
	}
	chain := Chain(tokens)
	c.mu.Lock()
	if c.layout == nil {
		if l, err := model.StateLayout(st); err == nil {
			c.layout = &l
		}
	}
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
	tail := append([]int32(nil), tokens[len(chain)*PageSize:]...)
	e := c.insert(chain, tail, sn)
	c.stats.Published++
	if c.disk != nil && e != nil {
		c.disk.enqueue(writeJob{pages: chain, tail: tail, snap: e.snap})
	}
	return true, nil
}

// insert stores the snapshot sn of the prefix whose full pages hash to
// chain and whose last tokens are tail, sharing the pages held already
// (sn's page runs are replaced by the held ones), and evicts to stay within
// the budget. It returns nil when sn alone exceeds the budget.
func (c *Cache) insert(chain []Hash, tail []int32, sn model.Snapshot) *entry {
	var key Hash
	if len(chain) > 0 {
		key = chain[len(chain)-1]
	}
	for _, e := range c.groups[key] {
		if e.pos == sn.Len && equalTokens(e.tail, tail) {
			c.lru.MoveToFront(e.elem)
			return nil // loaded twice at once
		}
	}
	var own, newBytes int64 = sn.Bytes(), 0
	for i, h := range chain {
		own -= sn.KV[i].Bytes()
		if c.pages[h] == nil {
			newBytes += sn.KV[i].Bytes()
		}
	}
	if own+newBytes > c.max {
		return nil
	}
	sn.KV = append([]*model.KVRows(nil), sn.KV...)
	e := &entry{pos: sn.Len, tail: tail, pages: chain, own: own}
	if len(chain) > 0 {
		e.group = chain[len(chain)-1]
	}
	for i, h := range chain {
		p := c.pages[h]
		if p == nil {
			p = &page{rows: sn.KV[i]}
			c.pages[h] = p
			c.bytes += sn.KV[i].Bytes()
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
	for c.bytes > c.max && c.lru.Len() > 0 {
		c.evict(c.lru.Back().Value.(*entry))
		c.stats.Evicted++
	}
	return e
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

// Clear drops everything, in memory and on disk (writes still queued are
// dropped too).
func (c *Cache) Clear() {
	if c.disk != nil {
		c.disk.clear()
	}
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
	if c.disk != nil {
		c.disk.stats(&s)
	}
	return s
}

// WaitRestored waits until the scan of the files found at Open is over (at
// once without a Dir).
func (c *Cache) WaitRestored(ctx context.Context) error {
	if c.disk == nil {
		return nil
	}
	select {
	case <-c.disk.restored:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
