package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// Client speaks the streaming side of the OpenAI chat completions API.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:8001 (a trailing
	// /v1 is accepted).
	BaseURL string
	APIKey  string // sent as a bearer token when set
	HTTP    *http.Client
}

func (c *Client) url(path string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(c.BaseURL, "/"), "/v1")
	return base + path
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Usage is the token accounting of a chat completion (the last chunk of a
// stream asked with stream_options.include_usage).
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// CachedTokens is usage.prompt_tokens_details.cached_tokens, -1 when the
// server did not say.
func (u *Usage) CachedTokens() int {
	if u == nil || u.PromptTokensDetails == nil {
		return -1
	}
	return u.PromptTokensDetails.CachedTokens
}

// Stream is one streamed answer with the times that the metrics come from.
type Stream struct {
	Sent time.Time // when the request was sent
	// First is when the first delta carrying output arrived (non-empty
	// content, reasoning_content or tool_calls; a role-only chunk does not
	// count); Last when the last such delta did. Zero when none came.
	First, Last time.Time
	Done        time.Time // when the stream ended
	// OutputChunks counts the deltas that carried output.
	OutputChunks int

	Content      string
	Reasoning    string
	ToolCalls    []chat.ToolCall
	FinishReason string
	Usage        *Usage
}

// TTFT is the time from sending to the first output delta (0 when none came).
func (s *Stream) TTFT() time.Duration {
	if s.First.IsZero() {
		return 0
	}
	return s.First.Sub(s.Sent)
}

// TPOT is (last output chunk − first output chunk) / (outputTokens − 1), the
// harness's time per output token after the first; 0 when outputTokens < 2.
func (s *Stream) TPOT(outputTokens int) time.Duration {
	if outputTokens < 2 || s.First.IsZero() {
		return 0
	}
	return s.Last.Sub(s.First) / time.Duration(outputTokens-1)
}

// Message is the answer as an assistant message (content null when empty).
func (s *Stream) Message() chat.Message {
	m := chat.Message{Role: "assistant", ToolCalls: s.ToolCalls}
	if s.Content == "" {
		m.Content = chat.Content{Null: true}
	} else {
		m.Content = chat.TextContent(s.Content)
	}
	if s.Reasoning != "" {
		r := s.Reasoning
		m.ReasoningContent = &r
	}
	return m
}

// chunk is one SSE data payload of a streamed chat completion.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"` // vLLM's newer name
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// StreamChat posts body to /v1/chat/completions and reads the SSE stream to
// its end. header is added to the request (X-Session-ID). A non-2xx answer,
// an error event in the stream or a stream cut before [DONE] is an error;
// what had arrived until then is returned with it.
func (c *Client) StreamChat(ctx context.Context, body []byte, header http.Header) (*Stream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url("/v1/chat/completions"), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	s := &Stream{Sent: time.Now()}
	// A server may close a kept-alive connection just as the next request
	// goes out on it (llama-server's HTTP library closes idle ones after
	// 5 s): the request then fails before any answer, with EOF or a write
	// error, and a replay would abort its conversation. Such a request
	// (no answer, on a reused connection) is sent again on a new one.
	reused := false
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
	resp, err := c.httpClient().Do(req)
	for try := 1; err != nil && reused && try <= maxStaleRetries && ctx.Err() == nil; try++ {
		req = req.Clone(req.Context())
		req.Body, _ = req.GetBody() // a bytes.Reader's: never fails
		resp, err = c.httpClient().Do(req)
	}
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return s, fmt.Errorf("POST %s: %s: %s", req.URL.Path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := s.read(resp.Body); err != nil {
		return s, fmt.Errorf("POST %s: %w", req.URL.Path, err)
	}
	return s, nil
}

// maxStaleRetries bounds how many times StreamChat sends a request again
// after a reused connection failed it before any answer.
const maxStaleRetries = 2

// maxToolCalls bounds the tool calls of one answer.
const maxToolCalls = 256

// read consumes SSE events: "data: " lines, blank-line separated; comments
// (":") and other fields are skipped; "data: [DONE]" ends the stream.
func (s *Stream) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	var content, reasoning strings.Builder
	var args []string // tool-call arguments, by index
	defer func() {
		s.Content, s.Reasoning = content.String(), reasoning.String()
		for i := range s.ToolCalls {
			s.ToolCalls[i].Function.Arguments = args[i]
		}
	}()
	dispatch := func(now time.Time) (done bool, err error) {
		if len(data) == 0 {
			return false, nil
		}
		payload := bytes.TrimSpace(data)
		data = data[:0]
		if string(payload) == "[DONE]" {
			return true, nil
		}
		var ch chunk
		if err := json.Unmarshal(payload, &ch); err != nil {
			return false, fmt.Errorf("bad SSE chunk %.200q: %w", payload, err)
		}
		if ch.Error != nil {
			return false, fmt.Errorf("server error in stream: %s", ch.Error.Message)
		}
		if ch.Usage != nil {
			s.Usage = ch.Usage
		}
		output := false
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			d := c.Delta
			if d.Content != nil && *d.Content != "" {
				content.WriteString(*d.Content)
				output = true
			}
			for _, r := range []*string{d.ReasoningContent, d.Reasoning} {
				if r != nil && *r != "" {
					reasoning.WriteString(*r)
					output = true
					break
				}
			}
			for _, tc := range d.ToolCalls {
				output = true
				if tc.Index < 0 || tc.Index >= maxToolCalls {
					return false, fmt.Errorf("tool_calls index %d out of range [0, %d)", tc.Index, maxToolCalls)
				}
				for tc.Index >= len(s.ToolCalls) {
					s.ToolCalls = append(s.ToolCalls, chat.ToolCall{})
					args = append(args, "")
				}
				t := &s.ToolCalls[tc.Index]
				if tc.ID != "" {
					t.ID = tc.ID
				}
				if tc.Type != "" {
					t.Type = tc.Type
				}
				t.Function.Name += tc.Function.Name
				args[tc.Index] += tc.Function.Arguments
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				s.FinishReason = *c.FinishReason
			}
		}
		if output {
			if s.First.IsZero() {
				s.First = now
			}
			s.Last = now
			s.OutputChunks++
		}
		return false, nil
	}
	for {
		line, err := br.ReadBytes('\n')
		now := time.Now()
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			switch {
			case len(line) == 0:
				done, derr := dispatch(now)
				if derr != nil {
					return derr
				}
				if done {
					s.Done = now
					return nil
				}
			case bytes.HasPrefix(line, []byte("data:")):
				v := bytes.TrimPrefix(line[5:], []byte(" "))
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
		}
		if err != nil {
			s.Done = now
			if errors.Is(err, io.EOF) {
				// A last event without its blank line still counts.
				done, derr := dispatch(now)
				if derr != nil {
					return derr
				}
				if done {
					return nil
				}
				return errors.New("stream ended before data: [DONE]")
			}
			return err
		}
	}
}

// ListModels returns the ids of GET /v1/models.
func (c *Client) ListModels(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/v1/models"), nil)
	if err != nil {
		return nil, err
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("GET /v1/models: %s", resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /v1/models: %w", err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}
