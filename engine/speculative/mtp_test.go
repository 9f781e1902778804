package speculative

import (
	"math"
	"testing"

	"github.com/edgellmd/edgellmd/engine/model"
	"github.com/edgellmd/edgellmd/engine/sample"
	"github.com/edgellmd/edgellmd/engine/tensor"
)

// TestMTPFeedMatchesReference: after several speculative steps (accepted
// and rejected drafts, the head's KV cut back after each draft), the head
// state the drafter keeps gives, for the next pending token, the logits a
// head fed every real row from scratch gives: the row of each token
// x_{t+1} with the trunk's h_t at position t, from the first generated
// token on. A wrong row, hidden state or position would only lower the
// acceptance, which the greedy tests cannot see. (The fitted head's block
// passes its input through, so only the synthetic qwen35 head, whose
// attention reads the rows, checks the rows before the last.)
func TestMTPFeedMatchesReference(t *testing.T) {
	path, _ := fittedStories(t)
	for _, tc := range []struct {
		name string
		m    model.Model
	}{
		{"stories260K-fitted", openModel(t, path, tensor.F16)},
		{"qwen35-synth-mtp", synthMTP(t, 5, tensor.F16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			hp := m.Hyper()
			V, E := hp.Vocab, hp.Embd
			prompt := []int32{1, 40, 47, 26}
			const ctxLen = 80
			d, err := New(m, Config{Mode: "tree", Steps: 4, TopK: 2, VerifyNodes: 6, Drafters: []string{"mtp", "suffix"}}, ctxLen)
			if err != nil {
				t.Fatal(err)
			}
			// the same request twice: the second time the suffix drafter
			// knows the text, so drafts are accepted and the head is fed
			// several rows per step
			var st model.State
			var seq []int32
			var pending int32
			for range 2 {
				st = m.NewState(ctxLen)
				lg, hid := make([]float32, V), make([]float32, E)
				if err := m.ForwardHidden(st, model.ChainBatch(prompt, 0, false), lg, hid); err != nil {
					t.Fatal(err)
				}
				d.Begin(prompt, hid)
				smp := sample.New(sample.Params{})
				seq = append(seq[:0], prompt...)
				pending = sample.Argmax(lg)
				seq = append(seq, pending)
				for range 12 {
					toks, err := d.Step(st, pending, ctxLen-st.Len(), smp)
					if err != nil {
						t.Fatal(err)
					}
					seq = append(seq, toks...)
					pending = toks[len(toks)-1]
				}
			}
			s := d.Stats()
			t.Logf("%+v", s)
			if s.Drafted == 0 || s.Accepted == 0 {
				t.Fatalf("nothing drafted or accepted: %+v", s)
			}
			d.mtp.pending(pending)
			if ok, err := d.mtp.feed(pending, st.Len()); !ok || err != nil {
				t.Fatalf("feed: %v %v", ok, err)
			}
			got := d.mtp.logits

			// reference: the trunk's hidden states of every committed token,
			// then the head over rows t = P-1 .. len-2
			committed := len(seq) - 1
			ref := m.NewState(ctxLen)
			all, hidden := make([]float32, committed*V), make([]float32, committed*E)
			if err := m.ForwardHidden(ref, model.ChainBatch(seq[:committed], 0, true), all, hidden); err != nil {
				t.Fatal(err)
			}
			P := len(prompt)
			rows := committed - (P - 1)
			hs := m.MTP().NewState(ctxLen)
			want := make([]float32, V)
			if err := m.MTP().Forward(hs, model.ChainBatch(seq[P:], P-1, false), hidden[(P-1)*E:], want, nil); err != nil {
				t.Fatal(err)
			}
			if rows != len(seq[P:]) {
				t.Fatalf("%d rows vs %d tokens", rows, len(seq[P:]))
			}
			worst := 0.0
			for i := range want {
				worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
			}
			if worst > 1e-4 || sample.Argmax(got) != sample.Argmax(want) {
				t.Errorf("drafter's head logits differ from the reference by %.3g (argmax %d vs %d)", worst, sample.Argmax(got), sample.Argmax(want))
			}
			t.Logf("%d rows fed, max difference %.3g", rows, worst)
		})
	}
}
