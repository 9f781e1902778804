package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/zerolog"

	"github.com/edgellmd/edgellmd/update"
)

// Updater installs a model bundle for POST /admin/update. The daemon
// implements it with update.Apply (its state directory, trusted keys and a
// health check that loads the new model) and serves the new model when the
// result is committed.
type Updater interface {
	Apply(ctx context.Context, bundle io.Reader, allowDowngrade bool) (update.Result, error)
}

// AdminOptions configure RegisterAdmin.
type AdminOptions struct {
	// APIKey is the bearer token the admin routes need. Empty turns them
	// off: they answer 403, since an unauthenticated update route would let
	// anyone who reaches the port replace the model.
	APIKey  string
	Updater Updater
	// MaxBundleBytes bounds the request body (413 beyond); <= 0 means no
	// bound here: the signed manifest's sizes and the disk-space check
	// bound what is written.
	MaxBundleBytes int64
	// UploadTimeout bounds reading a bundle, from the end of the request's
	// headers (408 beyond, the update given up and its lock freed); <= 0
	// means DefaultUploadTimeout. It replaces the server's body timeout
	// once the key is checked.
	UploadTimeout time.Duration
	Log           zerolog.Logger
}

// RegisterAdmin mounts the admin routes on r: POST /admin/update takes a
// bundle (update's tar format) as the request body, streamed into the
// staging folder as it arrives, and answers the update.Result as JSON;
// ?allow_downgrade=true installs an older version. The routes check the
// API key themselves (Server.Router's routes get no key check).
func RegisterAdmin(r *mux.Router, opt AdminOptions) {
	if opt.UploadTimeout <= 0 {
		opt.UploadTimeout = DefaultUploadTimeout
	}
	a := &admin{opt: opt, key: newKeyCheck(opt.APIKey)}
	r.Handle("/admin/update", a.auth(http.HandlerFunc(a.update))).Methods(http.MethodPost)
}

type admin struct {
	opt AdminOptions
	key keyCheck
}

func (a *admin) auth(h http.Handler) http.Handler {
	if a.opt.APIKey == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, &apiError{Status: http.StatusForbidden, Type: "permission_error", Code: "admin_disabled",
				Message: "admin routes need an API key: set api.key in the config file and send it as \"Authorization: Bearer KEY\""})
		})
	}
	return headerKeyOnly(a.key, h)
}

// updateResponse is the answer of POST /admin/update: the result, and on
// failure an OpenAI-style error beside it (it takes the place of the
// result's own "error" string).
type updateResponse struct {
	Object string `json:"object"` // "admin.update"
	update.Result
	Error *errorObject `json:"error,omitempty"`
}

func (a *admin) update(w http.ResponseWriter, r *http.Request) {
	if a.opt.Updater == nil {
		writeError(w, r, &apiError{Status: http.StatusNotImplemented, Type: "server_error", Code: "updates_unavailable",
			Message: "this server does not take model updates"})
		return
	}
	setBodyDeadline(w, r, a.opt.UploadTimeout, "api.upload_timeout")
	allow := false
	if v := r.URL.Query().Get("allow_downgrade"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, r, badRequest("allow_downgrade", "allow_downgrade: %q is not true or false", v))
			return
		}
		allow = b
	}
	body := io.Reader(r.Body)
	if a.opt.MaxBundleBytes > 0 {
		if r.ContentLength > a.opt.MaxBundleBytes {
			writeError(w, r, &http.MaxBytesError{Limit: a.opt.MaxBundleBytes})
			return
		}
		body = http.MaxBytesReader(w, r.Body, a.opt.MaxBundleBytes)
	}
	res, err := a.opt.Updater.Apply(r.Context(), body, allow)
	if err == nil {
		a.opt.Log.Info().Str("version", res.Version).Str("previous", res.Previous).Str("key", res.KeyID).Msg("admin: bundle installed")
		writeJSON(w, http.StatusOK, updateResponse{Object: "admin.update", Result: res})
		return
	}
	ae := updateError(r.Context(), err)
	a.opt.Log.Warn().Err(err).Str("version", res.Version).Bool("rolled_back", res.RolledBack).Msg("admin: bundle not installed")
	if rec := recordOf(r.Context()); rec != nil {
		rec.err = ae.Message
	}
	if ae.retryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfterSeconds))
	}
	dropUnreadBody(w, r)
	eb := ae.body().Error
	writeJSON(w, ae.Status, updateResponse{Object: "admin.update", Result: res, Error: &eb})
}

// updateError maps update's errors to statuses and codes.
func updateError(ctx context.Context, err error) *apiError {
	e := func(status int, typ, code string) *apiError {
		return &apiError{Status: status, Type: typ, Code: code, Message: err.Error()}
	}
	var mbe *http.MaxBytesError
	var ae *apiError // the upload's read deadline: update wraps the body's errors
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("bundle is larger than the server's limit of %d bytes", mbe.Limit)}
	case errors.Is(err, update.ErrSignature):
		return e(http.StatusForbidden, "permission_error", "untrusted_signature")
	case errors.Is(err, update.ErrBadBundle):
		return e(http.StatusBadRequest, "invalid_request_error", "invalid_bundle")
	case errors.Is(err, update.ErrIncompatible):
		return e(http.StatusUnprocessableEntity, "invalid_request_error", "incompatible_bundle")
	case errors.Is(err, update.ErrDowngrade):
		return e(http.StatusConflict, "invalid_request_error", "downgrade_refused")
	case errors.Is(err, update.ErrAlreadyCurrent):
		return e(http.StatusConflict, "invalid_request_error", "already_current")
	case errors.Is(err, update.ErrBusy):
		ae := e(http.StatusConflict, "rate_limit_error", "update_in_progress")
		ae.retryAfterSeconds = 5
		return ae
	case errors.Is(err, update.ErrNoSpace):
		return e(http.StatusInsufficientStorage, "server_error", "insufficient_storage")
	case errors.Is(err, update.ErrHealthCheck):
		return e(http.StatusUnprocessableEntity, "invalid_request_error", "health_check_failed")
	}
	return toAPIError(ctx, err)
}
