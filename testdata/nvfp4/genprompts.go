//go:build ignore

// genprompts writes the generated prompts of the broad NVFP4 parity
// goldens (prompts-gen.txt): n story-like prompts of 1 to 60 words,
// drawn from a fixed word list with a fixed seed, so that the same
// command always writes the same file:
//
//	go run testdata/nvfp4/genprompts.go -n 128 -seed 16 > testdata/nvfp4/prompts-gen.txt
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
)

var (
	names   = []string{"Tom", "Sue", "Lily", "Ben", "Max", "Mia", "Sam", "Anna", "Tim", "Lucy", "the cat", "the dog", "a bird", "the king", "a little girl", "an old man", "the bunny", "a big bear"}
	verbs   = []string{"saw", "found", "wanted", "liked", "made", "took", "gave", "lost", "heard", "helped", "played with", "looked at", "ran to", "jumped over", "shared", "hugged"}
	objects = []string{"a ball", "the tree", "a red box", "the park", "a toy car", "the sun", "a cake", "the river", "a shiny stone", "the moon", "a blue kite", "the garden", "a funny hat", "the door", "some flowers", "a big boat"}
	adverbs = []string{"happily", "slowly", "one day", "after lunch", "very fast", "in the morning", "with a smile", "again", "at night", "together"}
	joins   = []string{"and", "but", "so", "because", "then", "when"}
	openers = []string{"Once upon a time,", "One day,", "Yesterday", "In a small town,", "Long ago,", "Every morning", "After school,", ""}
)

func main() {
	n := flag.Int("n", 128, "prompts to write")
	seed := flag.Uint64("seed", 16, "random seed")
	flag.Parse()
	r := rand.New(rand.NewPCG(*seed, 0x9e3779b97f4a7c15))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	for i := 0; i < *n; i++ {
		want := 1 + r.IntN(60) // words
		var w []string
		if o := pick(openers); o != "" {
			w = append(w, strings.Fields(o)...)
		}
		for len(w) < want {
			w = append(w, strings.Fields(pick(names)+" "+pick(verbs)+" "+pick(objects))...)
			if r.IntN(3) == 0 {
				w = append(w, strings.Fields(pick(adverbs))...)
			}
			if len(w) < want {
				if r.IntN(2) == 0 {
					w[len(w)-1] += "."
				} else {
					w = append(w, pick(joins))
				}
			}
		}
		w = w[:want]
		if r.IntN(4) == 0 { // end mid-sentence or on a period, both happen in real prompts
			w[len(w)-1] = strings.TrimSuffix(w[len(w)-1], ".") + "."
		}
		fmt.Println(strings.Join(w, " "))
	}
}
