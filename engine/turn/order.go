package turn

import (
	"fmt"

	"github.com/edgellmd/edgellmd/engine/chat"
)

// CheckTurnOrder refuses role sequences that a chat template renders
// without complaint into a prompt the model was never trained on. Two
// assistant messages in a row are the case: the Qwen3 and Qwen3.5 templates
// (and ChatML) write each as its own closed turn, so the model would see
// itself answer twice with nobody speaking in between, and a generation
// prompt after a final assistant message opens a second assistant turn
// right after the first. Templates that check alternation themselves
// (raise_exception) fail to render, which is a 400 too. Consecutive user,
// tool or system messages are left alone: the templates render them as
// clients mean them (several user turns, a call's several results).
func CheckTurnOrder(req chat.Request) error {
	msgs := req.Messages
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Role == "assistant" && msgs[i-1].Role == "assistant" {
			return &FieldError{Field: fmt.Sprintf("messages[%d]", i), Message: fmt.Sprintf(
				"messages[%d]: two assistant messages in a row (messages[%d] and messages[%d]); the chat template would render them as two separate assistant turns, which the model never sees: merge them into one message (content and tool_calls)", i, i-1, i)}
		}
	}
	if n := len(msgs) - 1; n >= 0 && msgs[n].Role == "assistant" && req.AddGenerationPrompt {
		return &FieldError{Field: fmt.Sprintf("messages[%d]", n), Message: fmt.Sprintf(
			"messages[%d]: the conversation ends with an assistant message, and the generation prompt would open another assistant turn right after it; continuing a final assistant message (prefill) is not supported: end with a user or tool message, or send add_generation_prompt: false to render the conversation as it is", n)}
	}
	return nil
}
