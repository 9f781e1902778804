package batch

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/edgellmd/edgellmd/engine/tensor"
)

// ErrBroken is what every error of a broken engine matches (errors.Is): a
// forward pass (or other model work on the batcher's goroutine) panicked,
// the model's scratch and the states in that pass may hold anything, and
// the engine runs nothing more until it is loaded again (a restart, or a
// model swap).
var ErrBroken = errors.New("engine: broken")

// PassPanic is a panic caught on the batcher's goroutine: the requests in
// the pass get it as their error, and the engine stays broken with it
// (Engine.Broken).
type PassPanic struct {
	Value any       // what was panicked with
	Stack []byte    // where: the goroutine that panicked (a kernel worker's when it was one)
	At    time.Time // when
}

func (p *PassPanic) Error() string {
	return fmt.Sprintf("engine: a forward pass failed (panic: %v); the engine is marked broken and runs nothing more until edgellmd is restarted", p.Value)
}

func (p *PassPanic) Is(target error) bool { return target == ErrBroken }

// Broken returns the panic that broke the batcher, or nil while it works.
// Any goroutine may call it.
func (b *Batcher) Broken() *PassPanic { return b.broken.Load() }

// guard runs fn on the batcher's goroutine and turns a panic in it (or in
// the kernel workers it drives: tensor.HelperPanic) into a *PassPanic that
// breaks the batcher. The pass's requests get that error; nothing after it
// runs on the model, so nothing from it reaches the prefix cache.
func (b *Batcher) guard(fn func() error) (err error) {
	if p := b.broken.Load(); p != nil {
		return p
	}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		p := &PassPanic{Value: v, Stack: debug.Stack(), At: time.Now()}
		if hp, ok := v.(tensor.HelperPanic); ok {
			p.Value, p.Stack = hp.Value, hp.Stack
		}
		b.broken.CompareAndSwap(nil, p)
		b.log.Error().Str("panic", fmt.Sprint(p.Value)).Str("stack", string(p.Stack)).
			Msg("a forward pass panicked: the engine is marked broken (/health answers 503) until edgellmd is restarted")
		err = b.broken.Load()
	}()
	if b.hook != nil {
		b.hook()
	}
	return fn()
}
