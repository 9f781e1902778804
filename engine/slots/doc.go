// Package slots is the engine's sequence slots and admission by memory:
// how many generations run at once, and which request may start given the
// bytes its sequence state (KV rows for prompt + max_tokens, the recurrent
// state, an MTP drafter's) would add to those the slots hold (Pool, behind
// its own lock). Size is that arithmetic from the model's shape; Budget
// derives the bound from the memory the machine (or its cgroup) has.
//
// It knows slots by index and bytes only: the states themselves, and
// which queued request to try next, are the engine's (engine.Scheduler).
package slots
