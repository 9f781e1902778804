"""make_pretok.py writes pretok.jsonl.gz: how the Qwen pre-tokenizer regexes
split test strings, according to Python's `regex` module (which, unlike `re`,
has \\p{..} classes and reads \\s as Unicode White_Space, as Oniguruma in
Hugging Face tokenizers does).

    python3 make_pretok.py   # regex 2026.5.9, Python 3

Each line is {"pre": "qwen2"|"qwen35", "text": ..., "words": [...]}.
"""
import gzip
import json
import random
import regex

PATTERNS = {
    # tokenizer.json pre_tokenizer of Qwen2/Qwen3, and of Qwen3.5.
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen35": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}

HARD = [
    "", " ", "a", "'", "Hello world", "  leading", "trailing   ", "a  b   c", "\t\ttabs\t x \t ", "l1\nl2\r\nl3\rl4",
    "\n\n\n", " \n \n ", "x\r\n  y", "a \n\tb", "nb\u00a0sp\u00a0\u00a0x", "\u3000x", "\u2028\u2029", "v\u000bf\u000c",
    "nel\u0085x", " \u0085 ", "bom\ufeffx", "fs\x1cx", "123", " 1 2  3", "\u0663\u0664", "\u00b2\u00bd", "\u216b",
    "I'm you're we've they'll he'd it's DON'T", "'s 't 're", "''s", "' s", "x'll've", "'S'T'RE",
    "\u65e5\u672c\u8a9e\u3002", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
    "e\u0301", "\u0301abc", " \u0301", "a\u0301\u0302b", "x \u0301y", "\u0301\u0301", "a\u200bb", "a\u200db",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F44D\U0001F3FD", " \U0001F600 ", "!!!???", " ... ", ".\n\n", ". \n",
    "(a)[b]{c}", "a" * 60, " " * 50 + "x", "\n" * 5 + " x", "x" + " " * 5 + "\n" + " " * 3, "<|im_end|>", "\x00\x01",
]

ALPHABET = [
    "a", "b", "Z", "s", "t", "e", "l", "m", "d", "r", "v", "'", "'", " ", " ", " ", "\t", "\n", "\r", "\u00a0",
    "\u3000", "\u0085", "\ufeff", "\x1c", "\u2028", "0", "7", "\u0663", "\u00b2", ".", ",", "-", "(", '"', "<",
    "|", "\u00e9", "\u0301", "\u0308", "\u093f", "\u094d", "\u0e31", "\u65e5", "\u00fc", "\U0001F600", "\u200d",
    "\u0928", "\u00ad", "\x00",
]


def split(pattern, text):
    words = [m.group(0) for m in regex.finditer(pattern, text)]
    assert "".join(words) == text, (pattern, text)
    return words


def main():
    rnd = random.Random(42)
    texts = list(HARD)
    for _ in range(2000):
        texts.append("".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 20))))
    lines = [json.dumps({"made_by": "regex " + regex.__version__, "texts": len(texts)})]
    for pre, pattern in PATTERNS.items():
        for text in texts:
            lines.append(json.dumps({"pre": pre, "text": text, "words": split(pattern, text)}, ensure_ascii=False))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    with open("pretok.jsonl.gz", "wb") as f:
        f.write(gzip.compress(data, compresslevel=9, mtime=0))

if __name__ == "__main__":
    main()
