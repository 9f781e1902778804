// The official TypeScript SDKs against the daemon (run by
// scripts/agents-check.sh with the packages it installs): Anthropic's
// @anthropic-ai/sdk on /v1/messages and openai's Responses client on
// /v1/responses. Each check throws on a mismatch; the process exits 1.
//
//   BASE=http://127.0.0.1:PORT KEY=... MODEL=... node sdk-check.mjs
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

const { BASE, KEY, MODEL } = process.env;
const anthropic = new Anthropic({ baseURL: BASE, apiKey: KEY, maxRetries: 0 });
const openai = new OpenAI({ baseURL: BASE + "/v1", apiKey: KEY, maxRetries: 0 });
// An enum: the grammar bounds it in both call forms (Qwen3.5 writes string
// parameters raw, unbounded by maxLength).
const schema = { type: "object", properties: { city: { type: "string", enum: ["Oslo", "Paris"] } }, required: ["city"] };
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const check = (ok, what, got) => {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(got)}`);
};
const results = [];

async function messages() {
  const params = {
    model: MODEL, max_tokens: 160, temperature: 0, thinking: { type: "disabled" },
    messages: [{ role: "user", content: "Weather in Oslo?" }],
    tools: [{ name: "get_weather", description: "The weather in a city", input_schema: schema }],
    tool_choice: { type: "tool", name: "get_weather" },
  };
  const whole = await anthropic.messages.create(params);
  const use = whole.content.find((b) => b.type === "tool_use");
  check(use && whole.stop_reason === "tool_use" && typeof use.input.city === "string", "forced tool_use", whole);
  const streamed = await anthropic.messages.stream(params).finalMessage();
  check(same(streamed.content.map((b) => [b.type, b.name, b.input]), whole.content.map((b) => [b.type, b.name, b.input])) &&
    streamed.usage.output_tokens === whole.usage.output_tokens, "streamed equals whole", { streamed, whole });
  const next = { ...params, tool_choice: { type: "auto" }, max_tokens: 8,
    messages: [...params.messages, { role: "assistant", content: whole.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "12 C" }] }] };
  const { max_tokens, temperature, ...countParams } = next;
  const count = await anthropic.messages.countTokens(countParams);
  const second = await anthropic.messages.create(next);
  const u = second.usage;
  check(count.input_tokens === u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens, "count_tokens equals the charge", { count, u });
  try {
    await anthropic.messages.create({ ...params, model: "no-such-model" });
    check(false, "unknown model refused", null);
  } catch (e) {
    check(e instanceof Anthropic.NotFoundError && e.error?.error?.type === "not_found_error", "a 404 in Anthropic's shape", e.error);
  }
  results.push(`@anthropic-ai/sdk: forced tool_use, stream == whole, tool_result round trip, count_tokens == charge (${count.input_tokens}), 404 shape`);
}

async function responses() {
  const params = {
    model: MODEL, max_output_tokens: 160, temperature: 0, reasoning: { effort: "none" }, input: "Weather in Oslo?",
    tools: [{ type: "function", name: "get_weather", description: "The weather in a city", parameters: schema, strict: false }],
    tool_choice: { type: "function", name: "get_weather" },
  };
  const whole = await openai.responses.create(params);
  const call = whole.output.find((i) => i.type === "function_call");
  check(call && typeof JSON.parse(call.arguments).city === "string", "forced function_call", whole);
  const stream = await openai.responses.create({ ...params, stream: true });
  let last = -1, final = null;
  for await (const ev of stream) {
    check(ev.sequence_number === last + 1, "sequence numbers in order", ev);
    last = ev.sequence_number;
    if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
  }
  check(final && same(final.output.map((i) => [i.type, i.name, i.arguments]), whole.output.map((i) => [i.type, i.name, i.arguments])),
    "streamed equals whole", { final, whole });
  const next = await openai.responses.create({ model: MODEL, max_output_tokens: 8, previous_response_id: whole.id,
    tools: params.tools, input: [{ type: "function_call_output", call_id: call.call_id, output: "12 C" }] });
  check(next.usage.input_tokens > whole.usage.input_tokens, "previous_response_id continues the conversation", next.usage);
  try {
    await openai.responses.create({ ...params, previous_response_id: "resp_unknown" });
    check(false, "unknown previous_response_id refused", null);
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === "previous_response_id", "a 400 naming previous_response_id", e.error);
  }
  results.push(`openai: forced function_call, stream == whole (${last + 1} events in sequence), previous_response_id, 400 naming it`);
}

try {
  await messages();
  await responses();
  console.log(results.join("\n"));
} catch (e) {
  console.error("sdk-check:", e.message);
  process.exit(1);
}
