package web

import (
	"errors"
	"fmt"
	"github.com/rs/zerolog"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What a client may hold: the time to send a body, the media type of a
// JSON body, and the connections it keeps open.

// Body read deadlines when Options.BodyTimeout and
// AdminOptions.UploadTimeout are unset.
const (
	DefaultBodyTimeout   = 30 * time.Second
	DefaultUploadTimeout = 10 * time.Minute
)

// limitBodyTime gives every request with a body Options.BodyTimeout to
// send it.
func (s *Server) limitBodyTime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setBodyDeadline(w, r, s.opt.BodyTimeout, "api.body_timeout")
		next.ServeHTTP(w, r)
	})
}

// setBodyDeadline sets the connection's read deadline to timeout from now
// and wraps r.Body so that the deadline is lifted once the body has been
// read to its end: net/http then reads the connection in the background to
// notice a client that goes away, and a deadline left in place would cancel
// a long generation. A second call (an upload route's longer deadline)
// moves the deadline of a body not yet read. key names the setting, for
// the 408's message.
func setBodyDeadline(w http.ResponseWriter, r *http.Request, timeout time.Duration, key string) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	if tb, ok := r.Body.(*timedBody); ok {
		if !tb.done.Load() && tb.rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			tb.timeout, tb.key = timeout, key
		}
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return // not a network connection (a test's recorder)
	}
	r.Body = &timedBody{ReadCloser: r.Body, rc: rc, timeout: timeout, key: key}
}

// timedBody is a request body read under a deadline. Reads happen on the
// handler's goroutine; done is also read by writeError.
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	key     string
	done    atomic.Bool // read to its end, the deadline lifted
	failed  atomic.Bool // the deadline passed before the end
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var ne net.Error
	switch {
	case err == io.EOF:
		if !b.done.Swap(true) {
			b.rc.SetReadDeadline(time.Time{})
		}
	case err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()):
		b.failed.Store(true)
		err = &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_body_timeout",
			Message: fmt.Sprintf("the request body did not arrive within %s (the server's %s); the connection is closed", b.timeout, b.key)}
	}
	return n, err
}

// dropUnreadBody, for an answer given before the body was read to its end
// (401, 415, 413, 408), reads and discards what the client is still
// sending, for at most drainGrace and drainBytes, then closes the
// connection after the answer. Closing at once would leave the rest of the
// body unread, and the kernel answers that with a reset, which a client
// still writing its body (an upload) sees instead of the answer; a client
// that stalls is dropped after drainGrace. The body is never looked at.
func dropUnreadBody(w http.ResponseWriter, r *http.Request) {
	tb, ok := r.Body.(*timedBody)
	if !ok || tb.done.Load() {
		return
	}
	w.Header().Set("Connection", "close")
	if tb.failed.Load() {
		return // a stalled body (408): nothing more to wait for
	}
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// The client waits for "100 Continue" before it sends the body,
		// and net/http sends that on the first read: the answer goes
		// without asking for the body.
		return
	}
	if tb.rc.SetReadDeadline(time.Now().Add(drainGrace)) == nil {
		io.CopyN(io.Discard, tb.ReadCloser, drainBytes)
	}
}

// drainGrace and drainBytes bound what an early answer reads of a body.
const (
	drainGrace = time.Second
	drainBytes = 64 << 20
)

// requireJSON reads every body as JSON, whatever its Content-Type says
// (curl -d and Python's requests.post(data=...) send
// application/x-www-form-urlencoded; llama-server takes them), except from
// a browser page of an origin not in Options.CORSOrigins: such a page could
// otherwise start generations with a text/plain POST, which CORS lets
// through without asking the server first. A browser says where the page
// comes from in Origin (and Sec-Fetch-Site); those get 415.
func (s *Server) requireJSON(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); (err != nil || mt != "application/json") && s.fromOtherSite(r) {
			got := "none"
			if ct != "" {
				got = strconv.Quote(clientText(ct, 100))
			}
			writeError(w, r, &apiError{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
				Message: "a browser page of another origin must send the request body as JSON with \"Content-Type: application/json\" (a CORS preflight then asks api.cors_origins); the request's Content-Type is " + got})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fromOtherSite reports whether a browser page of an origin that
// Options.CORSOrigins does not allow sent r.
func (s *Server) fromOtherSite(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		_, ok := s.cors.allowOrigin(origin)
		return !ok
	}
	return strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site")
}

// ConnLimit caps the connections a server holds open: in all, and per
// client IP address, over any number of listeners. A connection past a cap
// is answered at once with a 503 and closed, never queued behind the
// others (golang.org/x/net/netutil.LimitListener would make it wait).
// Idle keep-alive connections count until the server closes them.
type ConnLimit struct {
	maxTotal, maxPerClient int

	mu        sync.Mutex
	total     int
	perClient map[string]int

	log        zerolog.Logger
	refused    atomic.Uint64 // connections answered 503, ever
	lastLogged time.Time     // the last refusal's log line (mu)
	unlogged   uint64        // refusals since (mu)
}

// SetLog makes l log refused connections: a warning naming the cap and
// the client, at most one a second (with the count since the last).
func (l *ConnLimit) SetLog(log zerolog.Logger) { l.log = log }

// Refused is the number of connections answered 503 so far.
func (l *ConnLimit) Refused() uint64 { return l.refused.Load() }

// refuse counts a connection turned away, and logs it unless one was
// logged within the second.
func (l *ConnLimit) refuse(client string) {
	l.refused.Add(1)
	l.mu.Lock()
	l.unlogged++
	now := time.Now()
	if now.Sub(l.lastLogged) < time.Second {
		l.mu.Unlock()
		return
	}
	n := l.unlogged
	l.unlogged, l.lastLogged = 0, now
	total, mine := l.total, l.perClient[client]
	l.mu.Unlock()
	l.log.Warn().Str("client", client).Uint64("refused", n).Int("open", total).Int("open_by_client", mine).
		Int("max_connections", l.maxTotal).Int("max_connections_per_client", l.maxPerClient).
		Msg("connection refused with 503: too many open connections (api.max_connections, api.max_connections_per_client)")
}

// NewConnLimit caps connections at maxTotal in all and maxPerClient per
// client address; a cap <= 0 is no cap. Connections that are not TCP (a
// Unix socket systemd passes) share the total only.
func NewConnLimit(maxTotal, maxPerClient int) *ConnLimit {
	return &ConnLimit{maxTotal: maxTotal, maxPerClient: maxPerClient, perClient: map[string]int{}, log: zerolog.Nop()}
}

// Listener wraps ln so that its connections count against l.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, limit: l}
}

func (l *ConnLimit) take(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxTotal > 0 && l.total >= l.maxTotal {
		return false
	}
	if client != "" && l.maxPerClient > 0 && l.perClient[client] >= l.maxPerClient {
		return false
	}
	l.total++
	if client != "" {
		l.perClient[client]++
	}
	return true
}

func (l *ConnLimit) give(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if client == "" {
		return
	}
	if l.perClient[client]--; l.perClient[client] <= 0 {
		delete(l.perClient, client)
	}
}

type limitedListener struct {
	net.Listener
	limit *ConnLimit
}

// tooManyConnections is the whole answer to a connection past a cap.
var tooManyConnections = func() []byte {
	body := `{"error":{"message":"too many open connections to this server; close idle ones or retry later","type":"unavailable_error","param":null,"code":"too_many_connections"}}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := ""
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			client = a.IP.String()
		}
		if ll.limit.take(client) {
			return &limitedConn{Conn: c, release: func() { ll.limit.give(client) }}, nil
		}
		// A fresh socket's send buffer is empty: the write does not block,
		// and the deadline makes sure of it.
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(tooManyConnections)
		c.Close()
		ll.limit.refuse(client)
	}
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
