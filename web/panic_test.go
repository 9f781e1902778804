package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
)

func TestHandlerPanicIs500WithLogLine(t *testing.T) {
	logs := &logBuffer{}
	s := &Server{log: zerolog.New(logs)}
	h := s.logRequests(s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler bug") })))
	rr := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req.Header.Set("X-Request-ID", "panic-1")
	h.ServeHTTP(rr, req)
	if rr.Code != 500 {
		t.Fatalf("status %d", rr.Code)
	}
	checkErrorShape(t, rr.Body.Bytes())
	var sawPanic, sawRequest bool
	for _, l := range logs.lines() {
		sawPanic = sawPanic || (l["message"] == "handler panic" && l["panic"] == "handler bug")
		sawRequest = sawRequest || (l["request_id"] == "panic-1" && l["status"] == float64(500))
	}
	if !sawPanic || !sawRequest {
		t.Errorf("log lines: panic %v request %v", sawPanic, sawRequest)
	}
}
