package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edgellmd/edgellmd/engine"
	"github.com/edgellmd/edgellmd/engine/turn"
)

// apiError is an error answered in OpenAI's shape:
// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}.
type apiError struct {
	Status  int
	Type    string // invalid_request_error, authentication_error, not_found_error, rate_limit_error, ...
	Message string
	Param   string // the request field at fault; "" is written as null
	Code    string // a machine-readable code; "" is written as null

	retryAfterSeconds int // > 0 adds a Retry-After header
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 that names the field at fault.
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

func modelNotFound(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` does not exist; this server serves one model (see GET /v1/models).", name)}
}

// requestTimeoutMessage names the setting that ended the request.
func requestTimeoutMessage(ctx context.Context) string {
	msg := "the request did not finish within the server's request timeout (api.request_timeout"
	if d, ok := ctx.Value(requestTimeoutKey{}).(time.Duration); ok {
		msg += fmt.Sprintf(", %v", d)
	}
	return msg + "), queueing included"
}

// requestTimeoutKey carries Options.RequestTimeout in a request's context.
type requestTimeoutKey struct{}

// errRequestTimeout is the cause of a context ended by Options.RequestTimeout.
var errRequestTimeout = errors.New("request timeout")

// errClientGone marks a request whose client cancelled or disconnected.
var errClientGone = errors.New("client disconnected")

// toAPIError maps the errors a handler may meet to the answer a client
// gets. Anything unknown is a 500: by then the input was already checked.
func toAPIError(ctx context.Context, err error) *apiError {
	var ae *apiError
	var fe *turn.FieldError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: fe.Field, Code: fe.Code, Message: fe.Message}
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("request body is larger than the server's limit of %d bytes", mbe.Limit)}
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
			Message: "the server's request queue is full; retry later", retryAfterSeconds: 1}
	case errors.Is(err, engine.ErrStopped):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Code: "server_stopping",
			Message: "the server is stopping"}
	case errors.Is(err, engine.ErrContextFull):
		param := "messages"
		if rec := recordOf(ctx); rec != nil && rec.promptParam != "" {
			param = rec.promptParam
		}
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
			Message: err.Error()}
	case ctx != nil && errors.Is(context.Cause(ctx), errRequestTimeout):
		return &apiError{Status: http.StatusGatewayTimeout, Type: "timeout_error", Code: "request_timeout",
			Message: requestTimeoutMessage(ctx)}
	case ctx != nil && errors.Is(context.Cause(ctx), ErrServerStopping):
		return &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable_error", Code: "server_stopping",
			Message: "the server stopped before the request finished (it was told to stop without waiting)"}
	case errors.Is(err, context.Canceled) || errors.Is(err, errClientGone):
		// nginx's "client closed request": nobody reads it, the log does.
		return &apiError{Status: 499, Type: "client_closed_request", Message: "the client closed the request"}
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "internal error: " + err.Error()}
}

// ErrServerStopping is the cause the daemon cancels in-flight requests
// with when it stops without waiting for them (a second SIGTERM, or the
// drain deadline): their error says the server ended them.
var ErrServerStopping = errors.New("the server is stopping")

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// writeError answers err and records it for the request's log line.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(r.Context(), err)
	if rec := recordOf(r.Context()); rec != nil {
		rec.err = ae.Message
	}
	if ae.retryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfterSeconds))
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="edgellmd"`)
	}
	dropUnreadBody(w, r)
	if rec := recordOf(r.Context()); rec != nil && rec.wire == wireAnthropic {
		writeJSON(w, ae.Status, anthropicErrorBody(ae))
		return
	}
	writeJSON(w, ae.Status, ae.body())
}

// The error shapes of the APIs served.
const (
	wireOpenAI uint8 = iota
	wireAnthropic
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil { // only our own types reach here
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"internal error: response encoding","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}
