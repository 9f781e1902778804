// Package sample picks the next token from a row of logits: greedy (argmax),
// or a seeded draw after temperature, top-k and top-p, in llama.cpp's order
// (top-k, top-p, temperature, draw). It owns its scratch buffers, so picking a
// token does not allocate, and the same seed gives the same tokens.
//
// It is not a place for grammar constraints or penalties; those would be
// further stages in front of Pick.
package sample
