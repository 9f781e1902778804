package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"
)

// Reload re-reads the config file and applies what can change live: draft
// (handed to the engine, which uses it from the next request on), power and
// log.level. A file with an error, or one that is gone, leaves the running
// config in place; the error (naming the key) is logged, returned and kept
// in LastReload until a reload succeeds. Changed keys that need a restart
// (listen, model, cache, api, log.format) are reported, not applied. SIGHUP
// comes here; reloads are serialised.
func (d *Daemon) Reload() error { return d.reload(true) }

// reload is Reload. The config-file watcher asks with onPurpose false: then
// a file that lacks whole top-level sections the file in force had is
// refused, since a file cut short (a writer that gave up, two writes with a
// pause between) would otherwise reset them to their defaults, power.pin
// included. Asked on purpose (SIGHUP, systemctl reload) it is applied.
func (d *Daemon) reload(onPurpose bool) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	notify := d.state.Load() == stateReady // READY=1 before startup finished would end it early
	if notify {
		d.sd.send(reloading()...)
	}
	st := &ReloadStatus{At: time.Now()}
	cur := d.Config()
	next, data, fromFile, err := d.readConfigFile(!d.explicit && !d.hadFile, true)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%s was removed or renamed: the running configuration stays in force until the file is back (%w)", d.configPath, fs.ErrNotExist)
	}
	sections := fileSections(data)
	if dropped := missingSections(d.sections, sections); err == nil && !onPurpose && fromFile && len(dropped) > 0 {
		err = fmt.Errorf("%s no longer has the section(s) %s that the file in force had: not applied, since a file cut short or still being written would reset them to their defaults; if you removed them on purpose, apply it with systemctl reload edgellmd (SIGHUP)",
			d.configPath, strings.Join(dropped, ", "))
	}
	var changed []string
	if err == nil {
		changed = configDiff(cur, next)
		// The engine may refuse parameters its model cannot draft with: then
		// nothing of this file is applied.
		if eng := d.eng.Load(); eng != nil && slices.ContainsFunc(changed, func(k string) bool { return strings.HasPrefix(k, "draft.") }) {
			if serr := eng.SetDraft(next.Draft); serr != nil {
				err = fmt.Errorf("%s: %w", d.configPath, serr)
			}
		}
	}
	if err != nil {
		st.Err = err.Error()
		d.lastReload.Store(st)
		// The daemon is fine and serves on: a warning, not an error.
		d.log.Warn().Err(err).Msg("config reload refused: the running config stays in force")
		if notify {
			d.sd.send(sd.SdNotifyReady, "STATUS="+*d.status.Load()+"; config reload failed: "+firstLine(st.Err))
		}
		return err
	}
	d.hadFile = d.hadFile || fromFile
	if fromFile {
		d.sections = sections
	}
	applied := cur
	for _, key := range changed {
		if reloadable(key) {
			st.Applied = append(st.Applied, key)
		} else {
			st.RestartRequired = append(st.RestartRequired, key)
		}
	}
	applied.Draft = next.Draft
	applied.Power = next.Power
	applied.Log.Level = next.Log.Level
	d.cfg.Store(&applied)
	if applied.Log.Level != cur.Log.Level {
		_ = d.level.Set(applied.Log.Level) // validated
	}
	if applied.Power != cur.Power {
		select {
		case d.powerKick <- struct{}{}:
		default:
		}
	}
	d.lastReload.Store(st)
	ev := d.log.Info()
	if len(st.RestartRequired) > 0 {
		ev = d.log.Warn()
	}
	ev.Strs("applied", st.Applied).Strs("restart_required", st.RestartRequired).
		Dict("draft", zerolog.Dict().Str("mode", applied.Draft.Mode).Int("steps", applied.Draft.Steps).
			Int("top_k", applied.Draft.TopK).Int("verify_nodes", applied.Draft.VerifyNodes).
			Strs("drafters", applied.Draft.Drafters)).Msg("config reloaded")
	if notify {
		d.sd.send(sd.SdNotifyReady, "STATUS="+*d.status.Load())
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// reloadable says whether a changed key takes effect without a restart.
func reloadable(key string) bool {
	return strings.HasPrefix(key, "draft.") || strings.HasPrefix(key, "power.") || key == "log.level"
}

// configSettle and configSettleTries: a reload reads the config file until
// two reads configSettle apart agree, at most configSettleTries times. An
// editor that writes in place, or a copy caught midway, shows a half file
// that a reload would otherwise apply, with defaults for the missing keys.
const (
	configSettle      = 100 * time.Millisecond
	configSettleTries = 20
)

// settledConfig reads the config file once it has stopped changing, and
// refuses one with no settings in it (emptied or truncated): applying it
// would reset every setting to its default, power.pin included.
func settledConfig(path string) ([]byte, error) {
	// Waiting here is for another program to finish writing the file, which
	// nothing signals when it keeps the file open or writes it in several
	// opens (the watch waits for the close; SIGHUP does not).
	return settleConfig(path, func() { time.Sleep(configSettle) })
}

// settleConfig is settledConfig, with wait between two reads (tests change
// the file there).
func settleConfig(path string, wait func()) ([]byte, error) {
	prev, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	for i := 0; ; i++ {
		wait()
		cur, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if bytes.Equal(cur, prev) {
			break
		}
		if i == configSettleTries {
			return nil, fmt.Errorf("%s kept changing for %s: not applied; the next reload (or the file watcher, once it settles) tries again", path, configSettle*configSettleTries)
		}
		prev = cur
	}
	if !hasSettings(prev) {
		return nil, fmt.Errorf("%s is empty (no settings, only blanks or comments): not applied, since it would reset every setting to its default; restore the file, or write the settings you want", path)
	}
	return prev, nil
}

// hasSettings reports whether YAML text has a line that is not blank or a
// comment.
func hasSettings(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			return true
		}
	}
	return false
}

// fileSections lists the top-level keys of a config file's text, in file
// order (nil for no text, or text that is not a YAML mapping).
func fileSections(data []byte) []string {
	var doc yaml.Node
	if len(data) == 0 || yaml.Unmarshal(data, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(root.Content); i += 2 {
		keys = append(keys, root.Content[i].Value)
	}
	return keys
}

// missingSections lists the sections of had that now lacks.
func missingSections(had, now []string) []string {
	var gone []string
	for _, k := range had {
		if !slices.Contains(now, k) {
			gone = append(gone, k)
		}
	}
	return gone
}
