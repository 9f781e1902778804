package sample

import (
	"fmt"
	"math"
)

// Penalties shape logits by what the sequence already holds, before the
// sampler sees them:
//
//   - Presence and Frequency are OpenAI's: a token that occurred c > 0
//     times in the output so far loses c·Frequency + Presence.
//   - Repetition is llama.cpp's repeat_penalty: a token among the last
//     RepeatLastN tokens of prompt and output has its logit divided by
//     Repetition when positive, multiplied by it otherwise; 1 (or 0) is off.
//   - Bias is OpenAI's logit_bias: added to the token's logit, first.
type Penalties struct {
	Presence    float32
	Frequency   float32
	Repetition  float32
	RepeatLastN int // <= 0 means 64, llama.cpp's default
	Bias        map[int32]float32
}

// DefaultRepeatLastN is the window of the repetition penalty when
// RepeatLastN is not set.
const DefaultRepeatLastN = 64

// Active reports whether p changes any logit.
func (p Penalties) Active() bool {
	return p.Presence != 0 || p.Frequency != 0 || p.repeats() || len(p.Bias) > 0
}

func (p Penalties) repeats() bool { return p.Repetition != 0 && p.Repetition != 1 }

// Window is the repetition penalty's window in tokens (0 when it is off).
func (p Penalties) Window() int {
	switch {
	case !p.repeats():
		return 0
	case p.RepeatLastN <= 0:
		return DefaultRepeatLastN
	}
	return p.RepeatLastN
}

// Validate reports the first setting out of range, naming it as the API
// does; vocab bounds the token ids of Bias.
func (p Penalties) Validate(vocab int) error {
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	switch {
	case bad(p.Presence) || p.Presence < -2 || p.Presence > 2:
		return fmt.Errorf("presence_penalty must be in [-2, 2], got %v", p.Presence)
	case bad(p.Frequency) || p.Frequency < -2 || p.Frequency > 2:
		return fmt.Errorf("frequency_penalty must be in [-2, 2], got %v", p.Frequency)
	case bad(p.Repetition) || p.Repetition < 0:
		return fmt.Errorf("repetition_penalty must be > 0, got %v", p.Repetition)
	}
	for id, b := range p.Bias {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("logit_bias: token %d is outside the vocabulary of %d tokens", id, vocab)
		}
		if bad(b) || b < -100 || b > 100 {
			return fmt.Errorf("logit_bias: the bias of token %d must be in [-100, 100], got %v", id, b)
		}
	}
	return nil
}

// Apply shapes row: bias, then for each token the repetition penalty when
// inWindow says it is in the window, then its output count's presence and
// frequency penalties. counts are the output tokens' occurrences.
func (p Penalties) Apply(row []float32, counts map[int32]int32, window map[int32]bool) {
	for id, b := range p.Bias {
		if int(id) < len(row) {
			row[id] += b
		}
	}
	if p.repeats() {
		r := p.Repetition
		for id := range window {
			if int(id) >= len(row) {
				continue
			}
			if row[id] > 0 {
				row[id] /= r
			} else {
				row[id] *= r
			}
		}
	}
	if p.Presence != 0 || p.Frequency != 0 {
		for id, c := range counts {
			if int(id) < len(row) && c > 0 {
				row[id] -= float32(c)*p.Frequency + p.Presence
			}
		}
	}
}
