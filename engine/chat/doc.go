// Package chat turns an OpenAI-style chat request into the model's prompt
// text, and the model's generated text back into an assistant message.
//
// Rendering runs the model's own Jinja chat template (tokenizer.chat_template)
// with gonja, set up to give byte for byte what Hugging Face's
// apply_chat_template gives: tool schemas keep the client's key order and
// tojson writes Python's json.dumps format; null content is "", text parts
// are joined, tool-call arguments are decoded to objects; lstrip_blocks,
// trim_blocks, raise_exception and strftime_now behave as in transformers.
// Models without a template get ChatMLTemplate.
//
//	tpl, err := chat.NewTemplate(src, bos, eos)
//	prompt, err := tpl.Render(chat.Request{Messages: msgs, Tools: tools,
//		AddGenerationPrompt: true, Kwargs: map[string]any{"enable_thinking": false}})
//
// Parsing is incremental: a Parser takes the generated text in pieces of any
// size and returns content, reasoning and tool-call deltas ready to stream;
// Assemble joins them into the final Message. It reads Qwen's JSON tool calls
// (<tool_call>{"name": ..., "arguments": ...}</tool_call>) and Qwen3.5's XML
// ones (<function=NAME><parameter=P>VALUE</parameter></function>), the latter
// typed by the request's tool schemas, and <think> reasoning.
//
//	p := chat.NewParser(req.Tools, chat.ParserOptions{StartInReasoning: chat.ReasoningOpen(prompt)})
//	for piece := range generated { send(p.Push(piece)) }
//	send(p.Finish())
//
// What it is not for: tokenizing (engine/tokenizer), HTTP and the OpenAI
// wire format (web), or checking that a call names a tool the request
// offered (the caller's policy).
package chat
