package daemon

import (
	"net/http"

	"github.com/edgellmd/edgellmd/web"
)

// newWebHandler builds the HTTP API (package web) over the scheduler.
func newWebHandler(o handlerOptions) (http.Handler, error) {
	return web.New(web.Options{
		Scheduler:      o.Scheduler,
		ModelName:      o.ModelName,
		ModelPath:      o.ModelPath,
		Template:       o.Template,
		APIKey:         o.APIKey,
		MaxBodyBytes:   o.MaxBodyBytes,
		RequestTimeout: o.RequestTimeout,
		Log:            o.Log,
		Ready:          o.Ready,
	})
}
