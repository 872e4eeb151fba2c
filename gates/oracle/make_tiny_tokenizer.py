#!/usr/bin/env python3
"""Train the tiny byte-level BPE tokenizer committed at fixtures/tiny_bpe_tokenizer.json.

The tokenizer is used by make_qwen3_random.py for the random-weight Qwen3 test
checkpoint. It is shaped like a real Qwen2/Qwen3 tokenizer.json (NFC normalizer,
Qwen split regex + ByteLevel(use_regex=False) pre-tokenizer, ByteLevel decoder,
special tokens appended after the learned vocabulary) but has only 1024 entries:

    ids 0..1020    256 byte symbols + 765 learned merges
    id  1021       <|endoftext|>
    id  1022       <|im_start|>
    id  1023       <|im_end|>

Training is deterministic (fixed corpus below, single pass of the `tokenizers`
BpeTrainer). Rerunning produces a byte-identical file; the sha256 is printed.

Usage: python3 gates/oracle/make_tiny_tokenizer.py [--out PATH]
Requires: tokenizers (pip install tokenizers).
"""
import argparse
import hashlib
import os

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "fixtures", "tiny_bpe_tokenizer.json")

LEARNED_VOCAB = 1021  # 256 byte symbols + 765 merges
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# The split regex used by Qwen2/Qwen3 tokenizers (contractions, letters with an
# optional leading non-letter, single digits, punctuation runs, newlines, spaces).
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Fixed training text, written for this fixture: English prose and a little code.
CORPUS = r'''
The quick brown fox jumps over the lazy dog. The dog did not move; it was asleep in the sun.
A small language model reads a sequence of tokens and predicts the next one. Each token is an
integer that stands for a piece of text: a word, part of a word, a space, or a single byte.
When the model has produced a token, the token is appended to the input and the model runs again.
This loop is called autoregressive decoding, and greedy decoding always picks the most likely token.

Once upon a time there was a little town at the edge of a forest. In the town lived a baker who
woke up every morning before the sun. She made bread, cakes and small sweet rolls with raisins.
The children of the town loved her rolls, and every afternoon they came running to her shop.
One winter the river froze, the roads were closed, and no flour could reach the town for weeks.
The baker looked at her empty shelves and thought about what she could still make for them.

The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is Rome.
The capital of Spain is Madrid, and the capital of Japan is Tokyo. Water boils at one hundred
degrees Celsius at sea level. The Earth goes around the Sun once a year, and the Moon goes around
the Earth about once a month. Light from the Sun takes a little more than eight minutes to reach us.

Here is a list of things to pack for a short trip:
1. a toothbrush and toothpaste
2. two shirts and a warm jumper
3. a phone charger
4. a book to read on the train
5. the tickets, printed or on the phone

def fibonacci(n):
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def main():
    values = [fibonacci(i) for i in range(10)]
    print("first ten:", values)
    total = sum(values)
    if total > 50:
        print(f"total is large: {total}")
    else:
        print(f"total is small: {total}")


if __name__ == "__main__":
    main()

fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

impl Matrix {
    pub fn new(rows: usize, cols: usize) -> Self {
        Matrix { rows, cols, data: vec![0.0; rows * cols] }
    }

    pub fn get(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.cols + c]
    }
}

fn main() {
    let m = Matrix::new(2, 3);
    println!("{} x {} = {}", m.rows, m.cols, m.get(1, 2));
    let xs: Vec<i32> = (0..10).map(|x| x * x).collect();
    for x in xs.iter() {
        if x % 2 == 0 {
            println!("even {}", x);
        }
    }
}

{"name": "tiny", "version": 1, "layers": [1, 2, 3, 4], "enabled": true, "scale": 0.5}

SELECT id, name, price FROM products WHERE price < 100 ORDER BY name;

To install the package, run the following command in a terminal and then restart the program.
If the installation fails, check that you have a working internet connection and enough disk
space, then try again. The configuration file lives in your home directory and can be edited
with any text editor. Lines that start with a hash sign are comments and are ignored.

Questions and answers. What is the tallest mountain in the world? Mount Everest, which is about
8849 metres high. Who wrote the play Hamlet? William Shakespeare. How many days are there in a
leap year? There are 366 days. What is two plus two? Two plus two is four. Why is the sky blue?
Sunlight is scattered by the air, and blue light is scattered more than red light.

The meeting started at nine o'clock. We're going to talk about the plan for next year, they'll
review the budget, and I'd like everyone to share one idea. It's not a long meeting; you've all
got work to do. She said the results weren't ready yet, but they'd be done by Friday.

Il fait beau aujourd'hui. Der Hund schläft im Garten. El gato come pescado. Das ist gut.
Je voudrais un café, s'il vous plaît. Wir gehen morgen in die Stadt. ¿Dónde está la estación?

numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 1024 2048 4096 65536 3.14159 2.71828 -1 +1
symbols: ( ) [ ] { } < > = == != <= >= + - * / % & | ^ ~ ! ? : ; , . ' " ` @ # $ \ _ -> => :: ...

A user asks the assistant a question, and the assistant writes a helpful and honest answer.
The assistant explains each step, gives a short example, and checks that the answer is correct.
If the question is unclear, the assistant asks for more details before it tries to answer.
'''


def build() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=LEARNED_VOCAB,
        min_frequency=0,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    # One iterator item per paragraph: fixed order, fixed content.
    paragraphs = [p for p in CORPUS.split("\n\n") if p.strip()]
    tok.train_from_iterator(paragraphs, trainer=trainer)
    learned = tok.get_vocab_size(with_added_tokens=False)
    if learned != LEARNED_VOCAB:
        raise SystemExit(f"trainer learned {learned} entries, expected {LEARNED_VOCAB}; enlarge CORPUS")
    tok.add_special_tokens(SPECIALS)
    assert tok.get_vocab_size(with_added_tokens=True) == LEARNED_VOCAB + len(SPECIALS)
    for i, s in enumerate(SPECIALS):
        assert tok.token_to_id(s) == LEARNED_VOCAB + i, (s, tok.token_to_id(s))
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args()
    tok = build()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    text = tok.to_str(pretty=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
        if not text.endswith("\n"):
            f.write("\n")
    with open(args.out, "rb") as f:
        data = f.read()
    print(f"{hashlib.sha256(data).hexdigest()}  {args.out}  ({len(data)} bytes, vocab {tok.get_vocab_size()})")


if __name__ == "__main__":
    main()
