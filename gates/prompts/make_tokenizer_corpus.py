#!/usr/bin/env python3
"""Write gates/prompts/tokenizer_corpus.jsonl: a deterministic tokenizer test corpus.

One JSON object per line: {"text": "..."}. Hand-written lists plus systematic combinations;
no randomness, so re-running reproduces the file byte for byte.

Usage: python3 gates/prompts/make_tokenizer_corpus.py [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROSE = [
    "Hello, world!",
    "hello world",
    "Hello World",
    "HELLO WORLD",
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse, I thought I would sail about a little.",
    "In the beginning the Universe was created. This has made a lot of people very angry and been widely regarded as a bad move.",
    "A language model assigns probabilities to sequences of tokens; a tokenizer turns text into those tokens.",
    "Please summarize the following paragraph in two sentences.",
    "What is the capital of France? The capital of France is Paris.",
    "Once upon a time, there was a little robot who wanted to learn how to paint.",
    "She sells sea shells by the sea shore.",
    "To be, or not to be: that is the question.",
    "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal, thank you very much.",
    "The meeting is scheduled for 3:30 p.m. on Tuesday, March 14th, 2023.",
    "e.g. i.e. etc. vs. Dr. St. Jr. Ph.D. U.S.A.",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "camelCaseIdentifier snake_case_identifier SCREAMING_SNAKE kebab-case-identifier PascalCase",
    "Tokenization is the process of splitting text into smaller units called tokens.",
    "  The sentence has two leading spaces.",
    "The sentence has trailing spaces.   ",
    "Sentence one. Sentence two! Sentence three? Sentence four...",
    "\"Quoted text,\" she said, 'and single quotes too.'",
    "“Smart quotes” and ‘curly apostrophes’ aren’t ASCII.",
    "An em dash—like this—and an en dash: 1990–2000.",
    "URL: https://example.com/path/to/page?query=1&lang=en#section and email: someone@example.org",
    "Version 2.5.1-rc.3+build.42 released on 2024-01-15T12:34:56Z.",
    "I have 3 apples, 12 oranges and 1,234,567 grapes.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
    "user: How do I reverse a list in Python?\nassistant: Use my_list[::-1] or my_list.reverse().",
    "Dear Sir or Madam,\n\nI am writing to inquire about the position.\n\nSincerely,\nJane Doe",
]

CONTRACTIONS = [
    "it's", "It's", "IT'S", "they're", "THEY'RE", "we've", "WE'VE", "I'm", "I'M", "you'll", "YOU'LL",
    "he'd", "HE'D", "don't", "DON'T", "can't won't shouldn't",
    "It's what they're saying: we've done it, I'm sure you'll agree he'd say so.",
    "'s 're 've 'm 'll 'd 't",
    "rock 'n' roll", "the '90s", "o'clock", "y'all'd've",
    "James's book and the Joneses' house",
    "'quoted' 'S 'Re 'VE",
]

CHINESE = [
    "你好，世界！",
    "我爱自然语言处理。",
    "今天天气很好，我们去公园散步吧。",
    "机器学习是人工智能的一个分支。",
    "北京是中华人民共和国的首都。",
    "這是一個繁體中文的句子。",
    "“你好”，他说。",
    "一二三四五六七八九十百千万亿",
    "中文English混合text测试",
    "数字123和符号！？。，、；：",
]

JAPANESE = [
    "こんにちは、世界！",
    "日本語の文章をトークン化します。",
    "カタカナとひらがなと漢字が混ざっています。",
    "東京タワーは高いです。",
    "ｶﾀｶﾅ（半角）と全角ＡＢＣ１２３",
    "私はラーメンが好きです。",
    "「吾輩は猫である。名前はまだ無い。」",
    "ー〜・…",
]

KOREAN = [
    "안녕하세요, 세계!",
    "한국어 문장을 토큰화합니다.",
    "저는 학생입니다.",
    "서울은 대한민국의 수도입니다.",
    "한글 ㄱㄴㄷ ㅏㅑㅓ",
    "오늘 날씨가 정말 좋네요 ㅋㅋㅋ",
]

ACCENTED = [
    "café naïve résumé façade jalapeño",
    "Ça va? Très bien, merci. À bientôt!",
    "Grüße aus München! Die Straße ist schön. Ärger, Öl, Übermut.",
    "¿Dónde está la biblioteca? ¡Qué bueno!",
    "São Paulo, coração, ação, não",
    "Zażółć gęślą jaźń",
    "Příliš žluťoučký kůň úpěl ďábelské ódy",
    "Tiếng Việt có dấu: Xin chào, cảm ơn bạn rất nhiều.",
    "İstanbul, Şişli, ığdır, Ğ ğ",
    "Þetta er íslenska: ð, þ, æ, ö",
    "Ångström, Ærø, Øresund, fjørd",
    "ﬁ ﬂ ﬀ ligatures and Å (U+212B) vs Å (U+00C5)",
    "œuvre, Œdipe, straße, STRASSE",
]

# Decomposed (NFD) forms: these exercise Unicode normalization differences (see oracle README).
NFD = [
    unicodedata.normalize("NFD", "café résumé naïve"),
    unicodedata.normalize("NFD", "Grüße aus Köln"),
    unicodedata.normalize("NFD", "한국어"),
    "e\u0301 a\u0300 o\u0308 n\u0303",
]

EMOJI = [
    "😀",
    "I love pizza 🍕 and tacos 🌮!",
    "👍👍🏻👍🏼👍🏽👍🏾👍🏿",
    "👨‍👩‍👧‍👦 family",
    "👩‍💻 coding, 🧑‍🚀 astronaut, 🏳️‍🌈 rainbow flag, 🏴‍☠️ pirate flag",
    "🇺🇸🇬🇧🇫🇷🇩🇪🇯🇵🇨🇳🇰🇷🇧🇷",
    "flags: 🇺🇸 🇬🇧 🇫🇷",
    "keycaps: 1️⃣ 2️⃣ #️⃣ *️⃣",
    "❤️ vs ❤ (with and without VS16)",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland tag sequence",
    "🎉🎉🎉🎉🎉",
    "Emoji at end 🚀",
    "🤖: beep boop",
    "☕️ ☀️ ✨ ⭐ ⚡",
]

CODE = [
    "def hello(name):\n    print(f\"Hello, {name}!\")\n\nhello(\"world\")\n",
    "import numpy as np\n\nx = np.arange(10)\nfor i in range(len(x)):\n    if x[i] % 2 == 0:\n        print(i, x[i] ** 2)\n",
    "class Foo:\n    def __init__(self, a: int, b: str = 'x') -> None:\n        self.a = a\n        self.b = b\n",
    "lambda x: x*2 if x>0 else -x  # comment",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "impl<T: Clone + Send> Trait for Wrapper<T> where T: 'static {\n    fn get(&self) -> Option<&T> { self.0.as_ref() }\n}",
    "#[derive(Debug, Clone)]\npub struct Config { pub n_ctx: usize, pub rope_theta: f32 }",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tprintf(\"%d\\n\", argc);\n\treturn 0;\n}\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "#define MAX(a, b) ((a) > (b) ? (a) : (b))",
    "{\"name\": \"memra\", \"version\": \"0.1.0\", \"tags\": [\"llm\", \"rust\"], \"nested\": {\"a\": 1, \"b\": null, \"c\": true}}",
    "{\n  \"key\": \"value\",\n  \"numbers\": [1, 2, 3.5, -4e10]\n}",
    "#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  echo \"$f\" | tr 'a-z' 'A-Z' > \"${f%.txt}.out\"\ndone\n",
    "ls -la /tmp && grep -rn 'TODO' src/ | wc -l",
    "curl -sSL https://example.com/install.sh | sh -s -- --yes 2>&1 >/dev/null",
    "const add = (a, b) => a + b;\nconsole.log(`sum = ${add(1, 2)}`);",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<div class=\"container\"><p>Hello <b>world</b></p></div>",
    "<table><tr><td>1</td><td>2</td></tr></table>",
    "x=1;y=2;z=x+y;print(z)",
    "if (a && b || !c) { return -1; } else if (a != b) { x <<= 2; y >>= 3; }",
    "a->b, a::b, a => b, a |> b, a ?? b, a ?. b, a ... b, a ..= b",
    "    indented with four spaces\n\tindented with a tab\n        eight spaces\n",
    "// line comment\n/* block\n   comment */\n",
    "0x7FFF_FFFF 0b1010_1010 0o755 1e-9 3.14159f32 1_000_000u64",
]

SCRIPTS = [
    "مرحبا بالعالم",
    "اللغة العربية جميلة جداً.",
    "שלום עולם",
    "עברית נכתבת מימין לשמאל.",
    "Привет, мир!",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Україна, Київ, ґанок, їжак",
    "नमस्ते दुनिया",
    "हिन्दी एक भारतीय भाषा है।",
    "สวัสดีชาวโลก",
    "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "Γειά σου Κόσμε! Αλφάβητο: αβγδεζηθ",
    "გამარჯობა მსოფლიო",
    "Բարեւ աշխարհ",
    "வணக்கம் உலகம்",
    "ওহে বিশ্ব",
    "ሰላም ልዑል",
    "ᚠᛇᚻ᛫ᛒᛦᚦ runes",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉",
]

MIXED = [
    "Hello 世界 Привет مرحبا 🌍",
    "The word 'こんにちは' means hello in Japanese.",
    "Rust 编程语言 is fast — очень быстрый!",
    "价格: $19.99 / €17,50 / ¥2000 / ₹1,499",
    "EN/中文/日本語/한국어/العربية/עברית/हिन्दी/ไทย",
    "abc123def456ghi",
    "ABC١٢٣ (Arabic-Indic digits) ०१२३ (Devanagari digits) ๑๒๓ (Thai digits)",
    "x² + y² = z²; ½ ¼ ¾; ① ② ③; Ⅻ",
    "°C °F ± × ÷ ≠ ≤ ≥ ∞ ∑ ∏ √ ∫ π",
]

NUMBERS = [
    "0", "7", "42", "123", "1234", "12345", "123456789", "3.14159265358979323846",
    "1000000", "1,000,000", "1.000.000,00", "-273.15", "+1 (555) 123-4567", "2^64 = 18446744073709551616",
    "99999999999999999999999999999999", "0000000", "007", "1e10 1E-10 6.02e23",
    "Call 911 or 112.", "In 1969, 600 million people watched.",
    "a1 b22 c333 d4444 e55555", "v1.2.3", "192.168.0.1:8080", "12:34:56.789",
]

PUNCT = [
    "!!!", "???", "...", "…", "?!?!", "!!!???...", "---", "___", "***", "===", "~~~",
    "<<<>>>", "(((())))", "[[[]]]", "{{{}}}", "@#$%^&*()", "\"\"\"", "'''", "```", "```python\nprint(1)\n```",
    ";;;:::", ",,,", "/\\/\\", "|||", "!@#$%^&*()_+-=[]{}|;':\",./<>?`~",
    "。。。！！！？？？", "«»‹›„“”‚‘’", "¡¿", "•·‧∙",
]

WHITESPACE = [
    " ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", "\r", " \n ", "\n \n",
    "a b", "a  b", "a   b", "a    b", "a\tb", "a\t\tb", "a\nb", "a\n\nb", "a\r\nb", "a \n b", "a\n b", "a \nb",
    " leading", "  leading2", "trailing ", "trailing2  ", "  both  ", "\nleading newline", "trailing newline\n",
    "\t\ttabs then text", "text then tabs\t\t", " \t \n \r\n ", "line1\nline2\nline3", "line1\r\nline2\r\nline3",
    "word\u00a0nbsp", "zero\u200bwidth\u200bspace", "ideographic\u3000space", "em\u2003space", "\ufeffBOM at start",
    "x = 10\n    y = 20", "a  1", "a   12", "  123", "\n123",
]

SINGLE_CHARS = [
    "", "a", "Z", "0", "9", ".", ",", "'", "\"", "<", ">", "|", "_", "-", "#", "$", "%", "&", "@", "\\", "/",
    "é", "ß", "中", "あ", "한", "ك", "א", "я", "ก", "😀", "€", "©", "™", "▁", "\u2581\u2581", "\ufffd", "\u200d",
    "\x00", "\x01", "\x1b", "\x7f", "\u0085", "\u2028", "\U0010fffd", "\ue000",
]

CHATML_SPECIALS = [
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>assistant\n4<|im_end|>\n",
    "<|endoftext|>",
    "text before<|endoftext|>text after",
    " <|im_start|> spaced <|im_end|> ",
    "<|im_start|><|im_end|><|im_start|><|im_end|>",
    "<|im_start",
    "<|im_start|",
    "im_start|>",
    "<|IM_START|>",
    "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<|file_sep|><|repo_name|>memra",
    "<repo_name>memra<file_sep>src/main.rs<filename>",
    "<jupyter_code>print(1)<jupyter_output>1<empty_output>",
    "<|im_start|>user\n你好<|im_end|>",
]

GEMMA_SPECIALS = [
    "<start_of_turn>user\nhi<end_of_turn>",
    "<bos><start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn>model\nSure!<end_of_turn>\n",
    "<bos>",
    "<bos>Hello",
    "<eos>",
    "<pad><unk><mask>",
    "text<eos>more",
    " <start_of_turn> spaced <end_of_turn> ",
    "<start_of_turn",
    "<start_of_image><end_of_image>",
    "<s>not a llama bos</s>",
    "<unused0><unused1>",
    "[multimodal]",
    "<h1>Title</h1><p>para</p><strong>bold</strong><em>em</em>",
    "<code>x = 1</code>",
]


def systematic() -> list[str]:
    out: list[str] = []
    # space runs of every length between two words (exercises whitespace-run tokens, incl. > 31)
    for n in list(range(1, 34)) + [40, 64]:
        out.append("a" + " " * n + "b")
    # leading space runs before a word
    for n in [1, 2, 3, 5, 8, 16, 31, 32, 33]:
        out.append(" " * n + "word")
    # tab / newline runs
    for n in [1, 2, 3, 4, 8, 31, 32, 35]:
        out.append("x" + "\t" * n + "y")
    for n in [1, 2, 3, 4, 5, 8, 31, 32, 40]:
        out.append("p" + "\n" * n + "q")
    # mixed whitespace combos
    for sep in [" \n", "\n ", " \t", "\t ", "\r\n ", " \r\n", "\n\t", "\t\n", "  \n\n  "]:
        out.append("foo" + sep + "bar")
    # digit runs of every length 1..25
    digits = "31415926535897932384626433832795"
    for n in range(1, 26):
        out.append(digits[:n])
    for n in [1, 2, 3, 4, 5, 7, 10]:
        out.append("x " + digits[:n] + " y")
        out.append("x" + digits[:n] + "y")
    # words x separators
    words = ["hello", "world", "Hello", "WORLD", "don't", "naïve", "日本", "😀"]
    seps = [" ", ", ", ".", "-", "_", "/", "\n"]
    for w in words:
        for s in seps:
            out.append(w + s + w)
    # punctuation followed by words / spaces
    for p in ["!", "?", ".", ",", ":", ";", "(", ")", "\"", "'"]:
        out.append("word" + p + " next" + p + p + p)
    # special tokens of all three models glued to text / each other
    for tok in ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>"]:
        out.append("a" + tok + "b")
        out.append(tok + tok)
        out.append(" " + tok + " ")
    return out


def long_texts() -> list[str]:
    para = (
        "The transformer architecture, introduced in 2017, relies entirely on attention mechanisms. "
        "Each layer computes queries, keys and values; attention weights are softmax(QK^T / sqrt(d)). "
        "Rotary position embeddings (RoPE) rotate pairs of dimensions by position-dependent angles. "
    )
    return [
        para * 4,
        "\n".join(f"{i}. item number {i} costs ${i * 3}.{i:02d}" for i in range(1, 21)),
        "".join(CHINESE) + "".join(JAPANESE),
        " ".join(EMOJI),
        "\n\n".join(CODE[:6]),
    ]


def build() -> list[str]:
    groups = [PROSE, CONTRACTIONS, CHINESE, JAPANESE, KOREAN, ACCENTED, NFD, EMOJI, CODE, SCRIPTS, MIXED,
              NUMBERS, PUNCT, WHITESPACE, SINGLE_CHARS, CHATML_SPECIALS, GEMMA_SPECIALS,
              systematic(), long_texts()]
    seen: set[str] = set()
    out: list[str] = []
    for g in groups:
        for t in g:
            if t in seen:
                continue
            seen.add(t)
            out.append(t)
    return out


def dump_line(obj) -> str:
    """json.dumps with raw UTF-8, but line/paragraph separators escaped so no reader splits a line."""
    s = json.dumps(obj, ensure_ascii=False)
    for ch in ("\u0085", "\u2028", "\u2029"):
        s = s.replace(ch, "\\u%04x" % ord(ch))
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE / "tokenizer_corpus.jsonl"))
    args = ap.parse_args()
    texts = build()
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for t in texts:
            f.write(dump_line({"text": t}) + "\n")
    print(f"wrote {args.out}: {len(texts)} lines")


if __name__ == "__main__":
    main()
