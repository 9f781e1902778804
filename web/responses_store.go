package web

import (
	"container/list"
	"sync"
	"time"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// Defaults of the Responses store (Options.ResponsesStoreSize and
// ResponsesStoreTTL; config keys api.responses_store_size and
// api.responses_store_ttl).
const (
	DefaultResponsesStoreSize = 256
	DefaultResponsesStoreTTL  = time.Hour
)

// storedResponse is a response kept for previous_response_id and GET:
// the conversation it answered (instructions left out: OpenAI does not
// carry them over) with its answer appended, and the response object.
type storedResponse struct {
	id           string
	conversation []chat.Message
	object       *responseObject
	expires      time.Time
	sessionKey   string // X-Session-Key of the turn, kept by the turns chained to it
}

// responseStore keeps the most recent stored responses, at most size of
// them and none older than ttl, in memory: a restart forgets them (a
// follow-up then gets a 400 naming the id, and an agent sends its whole
// input again).
type responseStore struct {
	mu    sync.Mutex
	size  int
	ttl   time.Duration
	order *list.List // front: newest; values *storedResponse
	byID  map[string]*list.Element
}

func newResponseStore(size int, ttl time.Duration) *responseStore {
	if size <= 0 {
		size = DefaultResponsesStoreSize
	}
	if ttl <= 0 {
		ttl = DefaultResponsesStoreTTL
	}
	return &responseStore{size: size, ttl: ttl, order: list.New(), byID: map[string]*list.Element{}}
}

func (s *responseStore) put(r *storedResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.expires = time.Now().Add(s.ttl)
	if e, ok := s.byID[r.id]; ok {
		s.order.Remove(e)
	}
	s.byID[r.id] = s.order.PushFront(r)
	for s.order.Len() > s.size {
		old := s.order.Back()
		s.order.Remove(old)
		delete(s.byID, old.Value.(*storedResponse).id)
	}
}

func (s *responseStore) get(id string) (*storedResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	r := e.Value.(*storedResponse)
	if time.Now().After(r.expires) {
		s.order.Remove(e)
		delete(s.byID, id)
		return nil, false
	}
	return r, true
}

func (s *responseStore) delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if ok {
		s.order.Remove(e)
		delete(s.byID, id)
	}
	return ok
}
