package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
)

// A server that closes a kept-alive connection as the next request comes
// in on it (llama-server does so after 5 s idle, which races with a
// client reusing it) does not fail the request: the client sends it again
// on a new connection. The server here is a raw TCP one, so that the
// close comes exactly after the second request was written.
func TestStreamChatRetriesClosedKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n"
	answer := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	served := make(chan int, 8) // requests answered, per connection in order
	go func() {
		for conn := 0; ; conn++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn, conn int) {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if conn == 0 && n == 1 {
						return // the first connection's second request: closed unanswered
					}
					var buf [1 << 12]byte
					for {
						if _, err := req.Body.Read(buf[:]); err != nil {
							break
						}
					}
					if _, err := c.Write([]byte(answer)); err != nil {
						return
					}
					served <- conn
				}
			}(c, conn)
		}
	}()
	cl := &Client{BaseURL: "http://" + ln.Addr().String(), HTTP: &http.Client{Transport: &http.Transport{}}}
	for i := range 2 {
		s, err := cl.StreamChat(context.Background(), []byte(`{"stream":true}`), nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if s.Content != "hi" {
			t.Fatalf("request %d: content %q", i, s.Content)
		}
	}
	if a, b := <-served, <-served; a != 0 || b != 1 {
		t.Fatalf("answered on connections %d and %d, want 0 then 1 (the retry)", a, b)
	}
}
