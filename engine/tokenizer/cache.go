package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
)

// wordCache remembers the BPE tokens of pre-token words. It is sharded to keep
// concurrent Encode calls from queueing on one lock, and bounded: a shard that
// fills up is emptied and starts over, which is crude but keeps memory flat
// and costs nothing on the hit path.
type wordCache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]cacheShard
}

const (
	cacheShards     = 32
	cacheMaxWordLen = 256 // longer words are rare and not worth keeping
)

type cacheShard struct {
	mu sync.Mutex
	m  map[string][]int32
	_  [48]byte // keep shards on separate cache lines
}

func newWordCache(maxWords int) *wordCache {
	c := &wordCache{seed: maphash.MakeSeed(), perShard: max(maxWords/cacheShards, 16)}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int32)
	}
	return c
}

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(c.seed, word)%cacheShards]
}

// get returns the cached tokens of word; the slice must not be modified.
func (c *wordCache) get(word string) ([]int32, bool) {
	if len(word) > cacheMaxWordLen {
		return nil, false
	}
	s := c.shard(word)
	s.mu.Lock()
	ids, ok := s.m[word]
	s.mu.Unlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > cacheMaxWordLen {
		return
	}
	ids = append([]int32(nil), ids...)
	word = strings.Clone(word) // do not pin the caller's text
	s := c.shard(word)
	s.mu.Lock()
	if len(s.m) >= c.perShard {
		clear(s.m)
	}
	s.m[word] = ids
	s.mu.Unlock()
}
