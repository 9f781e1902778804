// Command synthgen writes a synthetic model with synth.Build; it stands in
// for `edgellmd synth` when making goldens and takes the same options:
//
//	go run ./engine/synth/internal/synthgen -arch qwen35 -size tiny -seed 1 [-mtp] [-type F16] [-tokenizer tokenizer.json] -o OUT.gguf
//
// It prints the file's sha256 and size.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/edgellmd/edgellmd/engine/synth"
)

func main() {
	var opt synth.Options
	flag.StringVar(&opt.Arch, "arch", "qwen35", "architecture")
	flag.StringVar(&opt.Size, "size", "tiny", "tiny, small or bench")
	flag.StringVar(&opt.Type, "type", "", "weight type: F32, F16, BF16 or Q8_0 (default F32, F16 for bench)")
	flag.StringVar(&opt.TokenizerJSON, "tokenizer", "", "Hugging Face tokenizer.json (default: the built-in byte-level vocab)")
	flag.BoolVar(&opt.MTP, "mtp", false, "add the multi-token-prediction block")
	flag.Uint64Var(&opt.Seed, "seed", 1, "random seed")
	out := flag.String("o", "", "output .gguf file")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := synth.Write(*out, opt); err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
	f, err := os.Open(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
	fmt.Printf("%s  %s  %d bytes\n", hex.EncodeToString(h.Sum(nil)), *out, n)
}
