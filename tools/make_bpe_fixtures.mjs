// Writes tests/fixtures/gpt2/bpe_cases.json: texts and the ids OpenAI's tiktoken ("gpt2"
// encoding, encode_ordinary: <|endoftext|> in a text is ordinary text) gives them, cross-checked
// against gpt-3-encoder (a port of OpenAI's gpt-2 encoder.py); and byte strings with the text
// TextDecoder("utf-8") (not fatal: ill-formed sequences become U+FFFD, maximal subparts, as
// Python's decode(errors="replace")) gives them.
//
//   mkdir -p /tmp/bperef && cd /tmp/bperef && npm install tiktoken@1.0.22 gpt-3-encoder@1.1.4
//   NODE_PATH=/tmp/bperef/node_modules node tools/make_bpe_fixtures.mjs
// (run from the repository root; deterministic: a seeded generator makes the random texts).
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";

const require = createRequire(process.env.NODE_PATH ? process.env.NODE_PATH + "/" : import.meta.url);
const { get_encoding } = require("tiktoken");
const gpt3 = require("gpt-3-encoder");

let seed = 12345;
function rand() {  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const randint = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const fixed = [
  "Hello world",
  "Hello, world! How are you today?",
  "I'm sure you're right: we'll see, they've gone, she'd know, it's fine, don't.",
  "DON'T SHOUT'S 'tis 'll 're 've 'm 'd ' s '' 's's",
  "1234567890 3.14159 1,000,000 -42 +7 1e-5 0x1F ٣٤٥ ½ ¾ Ⅻ ① ²³",
  "😀😃😄😁 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ☕ 🙂🙃",
  "日本語のテキスト、中文，한국어 텍스트。",
  "e\u0301 n\u0308 Z\u0324\u0354\u0367\u0311\u0313 a\u20d7 \u0915\u093f \u0e01\u0e34",
  "thequickbrownfoxjumpsoverthelazydog".repeat(30),
  "a".repeat(500),
  "!".repeat(200) + "?".repeat(50),
  "🙂".repeat(100),
  "日本".repeat(150),
  "a  b   c\n\n\nd\t\te \u00a0\u3000x   \n  y  ",
  "   leading and trailing   ",
  "line one\r\nline two\r\n\r\n",
  "\n\n\n",
  " ",
  "\t",
  "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
  "https://example.com/path?query=1&b=two#frag",
  "مرحبا بالعالم שלום עולם नमस्ते दुनिया สวัสดีชาวโลก",
  "Ελληνικά Русский язык Українська Ǆemal",
  "∀x∈ℝ: x² ≥ 0 ∑ ∫ √ ≠ ≤ → ⇒",
  "<|endoftext|> is written as ordinary text",
  "x\u0085y\ufeffz\u200bw\u2028v\u2029u\u180e",
  "tabs\tand\u000bvertical\u000cfeeds\u001cinfo\u001fsep",
  "Ünïcödé ÀÉÎÕÜ ß ŉ ǰ İ ı",
  "don’t “quoted” — dash – en … ellipsis",
];

// Random texts from a pool of code points of many classes (all assigned by Unicode 13, so
// that Unicode-version differences between tiktoken's tables and ember's cannot matter).
const ranges = [
  [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0x09, 0x0d], [0xa0, 0xff], [0x100, 0x17f], [0x300, 0x36f],
  [0x391, 0x3c9], [0x410, 0x44f], [0x5d0, 0x5ea], [0x627, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x966, 0x96f],
  [0xe01, 0xe2e], [0x2000, 0x200a], [0x2010, 0x2027], [0x2070, 0x2079], [0x2150, 0x2182], [0x2190, 0x21ff],
  [0x3000, 0x3002], [0x3041, 0x3096], [0x4e00, 0x4fff], [0xac00, 0xad00], [0xff01, 0xff5e], [0x1f300, 0x1f5ff],
  [0x1f600, 0x1f64f], [0x1f900, 0x1f9ff], [0x1d400, 0x1d44f], [0x10400, 0x1044f],
];
const randomTexts = [];
for (let i = 0; i < 300; ++i) {
  let s = "";
  const n = randint(1, 60);
  for (let j = 0; j < n; ++j) {
    const [lo, hi] = pick(ranges);
    s += String.fromCodePoint(randint(lo, hi));
  }
  randomTexts.push(s);
}

const enc = get_encoding("gpt2");
const cases = [];
for (const text of [...fixed, ...randomTexts]) {
  const ids = Array.from(enc.encode_ordinary(text));
  const ref = gpt3.encode(text);
  if (JSON.stringify(ids) !== JSON.stringify(ref)) {
    console.error("tiktoken and gpt-3-encoder disagree on", JSON.stringify(text), "- keeping tiktoken's ids");
  }
  const back = new TextDecoder().decode(enc.decode(new Uint32Array(ids)));
  if (back !== text) throw new Error("tiktoken does not round-trip " + JSON.stringify(text));
  cases.push({ text, ids });
}
enc.free();

// Byte strings, valid and not: expected text as TextDecoder gives it (UTF-8 bytes, hex).
const hex = (b) => Buffer.from(b).toString("hex");
const byteCases = [];
const special = [
  [0xe2, 0x82], [0xe2, 0x82, 0x41], [0xf0, 0x80, 0x80, 0x80], [0xf0, 0x9f, 0x98], [0xed, 0xa0, 0x80], [0xc0, 0xaf],
  [0xf4, 0x90, 0x80, 0x80], [0xff], [0x80, 0x80], [0xe0, 0x80, 0x80], [0xf0, 0x9f, 0x98, 0x80], [0x61, 0xf0, 0x9f],
];
const pools = [[0x00, 0x7f], [0x80, 0xbf], [0x80, 0xbf], [0xc2, 0xdf], [0xe0, 0xef], [0xf0, 0xf4], [0xc0, 0xc1], [0xf5, 0xff]];
for (const b of special) byteCases.push(b);
for (let i = 0; i < 300; ++i) {
  const n = randint(1, 12);
  const b = [];
  for (let j = 0; j < n; ++j) {
    const [lo, hi] = pick(pools);
    b.push(randint(lo, hi));
  }
  byteCases.push(b);
}
const decode = byteCases.map((b) => ({
  bytes: hex(b),
  text: hex(Buffer.from(new TextDecoder("utf-8", { fatal: false }).decode(Uint8Array.from(b)), "utf8")),
}));

const out = {
  reference: "tiktoken " + JSON.parse(readFileSync(require.resolve("tiktoken").replace(/[^/]*$/, "package.json"))).version + " get_encoding('gpt2').encode_ordinary; " +
    "decode: TextDecoder('utf-8') of node " + process.versions.node,
  cases,
  decode,
};
writeFileSync("tests/fixtures/gpt2/bpe_cases.json", JSON.stringify(out, null, 0) + "\n");
console.log("wrote tests/fixtures/gpt2/bpe_cases.json:", cases.length, "texts,", decode.length, "byte strings");
