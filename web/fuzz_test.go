package web

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// FuzzDecodeChatRequest: any body decodes to a request or to a 400 that
// names what is wrong; never a panic, never another status; a request that
// passes renders (or fails to render) without panicking.
func FuzzDecodeChatRequest(f *testing.F) {
	seeds := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stop":["a","b"],"max_tokens":5}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":"q"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"out"}],"tools":[` + bashTool + `],"tool_choice":"required","parallel_tool_calls":false,` +
			`"chat_template_kwargs":{"enable_thinking":false},"seed":-3,"temperature":0.5,"top_k":-1}`,
		`{"messages":[{"role":"developer","content":"d"}],"tool_choice":{"type":"function","function":{"name":"x"}}}`,
		`{"messages":[],"n":1,"logprobs":false,"stop":"x"}`,
		`[]`, `null`, `{"messages":`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if paths, _ := filepath.Glob(chatRenderGoldens); len(paths) > 0 {
		if data, err := os.ReadFile(paths[0]); err == nil {
			f.Add(data)
		}
	}
	tpl, err := chat.NewTemplate("", "", "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeChatRequest(body)
		if err != nil {
			// (a turn.FieldError from the pipeline's validation is a 400 too)
			if ae := toAPIError(nil, err); ae.Status != 400 || ae.Message == "" {
				t.Fatalf("error %v (%T) is not a 400 with a message", err, err)
			}
			return
		}
		if len(p.Chat.Messages) == 0 {
			t.Fatal("a request without messages passed")
		}
		tpl.Render(p.Chat)
	})
}
