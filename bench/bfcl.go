package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// BFCLCase is one single-turn function-calling prompt in the BFCL format of
// bfcl_calib.jsonl: messages, OpenAI tools and the BFCL subset it comes from.
// PossibleAnswer is BFCL v4's ground truth when the file carries it
// ("possible_answer" or "ground_truth"): the expected calls, each
// {function name: {parameter: [allowed values...]}}, where an allowed ""
// marks an optional parameter.
type BFCLCase struct {
	ID             string                        `json:"id,omitempty"`
	Subset         string                        `json:"subset"`
	Messages       []chat.Message                `json:"messages"`
	Tools          []json.RawMessage             `json:"tools"`
	PossibleAnswer []map[string]map[string][]any `json:"-"`
}

// LoadBFCL reads a BFCL-format JSONL file.
func LoadBFCL(path string) ([]BFCLCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load BFCL cases: %w", err)
	}
	defer f.Close()
	return ParseBFCL(f, path)
}

// ParseBFCL reads BFCL cases from r; name is used in error messages.
func ParseBFCL(r io.Reader, name string) ([]BFCLCase, error) {
	var cases []BFCLCase
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var c BFCLCase
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		var gt struct {
			PossibleAnswer json.RawMessage `json:"possible_answer"`
			GroundTruth    json.RawMessage `json:"ground_truth"`
		}
		if err := json.Unmarshal(b, &gt); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		for _, raw := range []json.RawMessage{gt.PossibleAnswer, gt.GroundTruth} {
			if len(raw) == 0 || string(raw) == "null" {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&c.PossibleAnswer); err != nil {
				return nil, fmt.Errorf("%s:%d: possible_answer: want a list of {function: {parameter: [allowed values]}}: %w", name, line, err)
			}
			break
		}
		if len(c.Messages) == 0 {
			return nil, fmt.Errorf("%s:%d: messages: missing or empty", name, line)
		}
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s_%d", c.Subset, line)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", name)
	}
	return cases, nil
}
