"""llama.cpp as the oracle for a bundle converted from a GGUF file: greedy tokens, tokenizer ids, logits.

Runs llama.cpp (llama-cpp-python) on the GGUF file and onnxruntime-genai on the bundle that
`winml bundle from-gguf` made from it, CPU, greedy, on fixed prompts (plain and through the chat
template), and writes one JSON document: each prompt's token ids, both sides' greedy continuations and
where they part, the tokenizer's ids on a few hundred strings from both, and teacher-forced logits
compared position by position (top-1 agreement, KL). tests/e2e/test_real_model_e2e.py reads the
committed document (tests/data/real_model/smollm2_llamacpp.json).

    pip install llama-cpp-python==0.3.36     # builds llama.cpp from source (~11 min on 2 cores)
    python benchmarks/llamacpp_oracle.py GGUF BUNDLE -o tests/data/real_model/smollm2_llamacpp.json

With ``--screen`` it writes another document (tests/data/real_model/smollm2_llamacpp_screened.json): a
longer fixed list of candidate prompts, each generated greedily by both sides to the end of turn or 64
tokens, every candidate kept with where the two part (if they do). The prompts on which they never part
are the ones a test holds to every token; the others part where int8 activations flip a near-tie
(the main document measures those margins against the exact model).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

PLAIN = [
    "The capital of France is",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "Once upon a time, in a small village,",
    "The largest planet in our solar system is",
    "import numpy as np\n\ndef softmax(x):",
    "The Great Wall of China was built",
    "Photosynthesis is the process by which",
    "1, 2, 3, 4, 5,",
]
CHAT = [
    "What is the capital of Germany?",
    "Write a haiku about the sea.",
    "How many legs does a spider have?",
    "Explain photosynthesis in one sentence.",
    "What is the capital of France?",
    "List three fruits.",
]
NEW_TOKENS = 64
#: --screen's candidates: the prompts above, then more of both kinds, in this order (none dropped).
SCREEN_PLAIN = PLAIN + [
    "The chemical symbol for gold is",
    "The first president of the United States was",
    "The speed of light in a vacuum is",
    "A triangle has three sides, and a square has",
    "The Pacific Ocean is the largest ocean on Earth. It",
    "To make a cup of tea, first",
    "The human heart has four chambers:",
    "Python is a programming language that",
    "SELECT name, age FROM users WHERE",
    "Monday, Tuesday, Wednesday,",
    "January, February, March, April,",
    "The opposite of hot is",
    "The Eiffel Tower is located in",
    "class Stack:\n    def __init__(self):",
    "Dear Sir or Madam,\n\nI am writing to",
    "The mitochondria is the powerhouse of",
    "Shakespeare wrote many plays, including",
    "The boiling point of water at sea level is 100 degrees",
    "for i in range(10):",
    "The moon orbits the Earth, and the Earth orbits",
]
SCREEN_CHAT = CHAT + [
    "What is 2 + 2?",
    "Name the largest ocean.",
    "Who wrote Romeo and Juliet?",
    "What color is the sky on a clear day?",
    "Translate 'thank you' into French.",
    "What is the boiling point of water in Celsius?",
    "Give me a synonym for happy.",
    "What is the capital of Italy?",
    "How many days are in a week?",
    "Say hello.",
]
SENTENCES = [
    "It was the best of times, it was the worst of times.",
    "Call me Ishmael. Some years ago—never mind how long precisely—I went to sea.",
    "We hold these truths to be self-evident, that all men are created equal.",
    "The quick brown fox jumps over the lazy dog.",
    "She said: \"Don't touch that!\" and he didn't.",
    "In 1492, Columbus sailed the ocean blue; in 1969, Apollo 11 landed on the Moon.",
    "for (int i = 0; i < n; ++i) { total += a[i] * b[i]; }",
    "import numpy as np\nx = np.arange(10).reshape(2, 5)\nprint(x.T)",
    "Prices rose 3.75% to $1,234.56 on 2024-03-15 at 09:30:00.",
    "Café, naïve, résumé, jalapeño, Zürich, São Paulo, Kraków.",
    "東京は日本の首都です。 北京是中国的首都。 서울은 한국의 수도입니다.",
    "Emoji: 🙂 🚀 🎉 👍🏽 — and a tab\there, two spaces  there.",
    "   leading spaces, trailing spaces   ",
    "line one\nline two\n\nline four\r\nwindows line",
    "They're here; we've gone; I'm sure you'll see it's fine, she'd say.",
    'HTTP/1.1 200 OK\nContent-Type: application/json\n\n{"key": [1, 2, 3]}',
    "E = mc^2, a² + b² = c², ∑_{i=1}^{n} i = n(n+1)/2",
    "<|im_start|> is a special token, written as text here.",
]


def tokenizer_strings(n: int = 300, seed: int = 0) -> list[str]:
    """Fixed test strings: sentences, numbers, code, whitespace and Unicode, pieced together with a seed."""
    rng = random.Random(seed)
    words = " ".join(SENTENCES).split()
    out = list(SENTENCES)
    while len(out) < n:
        kind = rng.randrange(5)
        if kind == 0:
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))))
        elif kind == 1:
            out.append(" ".join(str(rng.randint(0, 10 ** rng.randint(1, 9))) for _ in range(rng.randint(1, 4))))
        elif kind == 2:
            out.append(f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 5)}f} {rng.choice(words)}")
        elif kind == 3:
            out.append(rng.choice(words) + " " * rng.randint(1, 5) + rng.choice(words) + "\n" * rng.randint(0, 3))
        else:
            a, b = rng.sample(SENTENCES, 2)
            cut = rng.randint(0, len(a))
            out.append(a[:cut] + b[: rng.randint(0, len(b))])
    return out[:n]


def compare_tokenizers(llama_ids, tokenizer, bundle: Path) -> tuple[list[dict], list[str], list[str]]:
    """llama.cpp's ids of every test string (special tokens parsed, as onnxruntime-genai parses them), and
    the strings where onnxruntime-genai's tokenizer, and the tokenizers library on the same tokenizer.json,
    give other ids."""
    from tokenizers import Tokenizer

    library = Tokenizer.from_file(str(bundle / "tokenizer.json"))
    tokenized = [{"text": s, "ids": llama_ids(s, special=True)} for s in tokenizer_strings()]
    genai = [t["text"] for t in tokenized if [int(x) for x in tokenizer.encode(t["text"])] != t["ids"]]
    lib = [t["text"] for t in tokenized if library.encode(t["text"]).ids != t["ids"]]
    return tokenized, genai, lib


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def llama_greedy(llm, ids: list[int], n: int) -> tuple[list[int], np.ndarray]:
    """n greedy tokens from llama.cpp (argmax of its own logits), and its logits at every position."""
    llm.reset()
    llm.eval(ids)
    out: list[int] = []
    for _ in range(n):
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(nxt)
        llm.eval([nxt])
    return out, np.array(llm.scores[: llm.n_tokens], dtype=np.float64)


def genai_greedy(model, ids: list[int], n: int, fixed_length: bool = True) -> list[int]:
    """n greedy tokens from onnxruntime-genai; ``fixed_length=False`` stops at the end of turn, as an app would."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    length = {"min_length": len(ids) + n} if fixed_length else {}
    params.set_search_options(max_length=len(ids) + n, do_sample=False, **length)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array(ids, np.int32))
    out: list[int] = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
    return out


def shown_prompt(tokenizer, text: str, chat: bool) -> str:
    """The prompt as the model sees it: ``text``, or a user turn through the bundle's chat template."""
    if not chat:
        return text
    return tokenizer.apply_chat_template(json.dumps([{"role": "user", "content": text}]), add_generation_prompt=True)


def greedy_to_end(generate, ids: list[int], n: int, eos: set[int]) -> list[int]:
    """Greedy tokens up to and including the first end-of-turn token, at most n."""
    out = generate(ids, n)
    end = next((i for i, t in enumerate(out) if t in eos), None)
    return out if end is None else out[: end + 1]


def screen(llm, model, tokenizer, eos: set[int], llama_ids) -> list[dict]:
    """Every candidate prompt generated by both sides (end of turn or NEW_TOKENS) and where they part."""
    cases = []
    for text, chat in [(t, False) for t in SCREEN_PLAIN] + [(t, True) for t in SCREEN_CHAT]:
        shown = shown_prompt(tokenizer, text, chat)
        ids = llama_ids(shown, special=True)
        theirs = greedy_to_end(lambda i, n: llama_greedy(llm, i, n)[0], ids, NEW_TOKENS, eos)
        mine = greedy_to_end(lambda i, n: genai_greedy(model, i, n, fixed_length=False), ids, NEW_TOKENS, eos)
        k = first_difference(mine, theirs)
        if k is None and len(mine) != len(theirs):
            k = min(len(mine), len(theirs))
        cases.append(
            {
                "text": text,
                "chat_template": chat,
                "ids": ids,
                "llamacpp_tokens": theirs,
                "bundle_tokens": mine,
                "first_difference": k,
                "llamacpp_text": llm.detokenize(theirs).decode("utf-8", errors="replace"),
            }
        )
        print(f"{text[:40]!r}: first difference {k}", file=sys.stderr)
    return cases


def bundle_logits(session, config: dict, ids: list[int]) -> np.ndarray:
    """The bundle's logits for a whole sequence in one forward pass (teacher forcing)."""
    decoder = config["model"]["decoder"]
    feeds = {"input_ids": np.array([ids], np.int64), "attention_mask": np.ones((1, len(ids)), np.int64)}
    empty = np.zeros((1, decoder["num_key_value_heads"], 0, decoder["head_size"]), np.float32)
    for i in range(decoder["num_hidden_layers"]):
        feeds[f"past_key_values.{i}.key"] = feeds[f"past_key_values.{i}.value"] = empty
    return session.run(["logits"], feeds)[0][0].astype(np.float64)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare_logits(reference: np.ndarray, other: np.ndarray) -> dict:
    p, q = _log_softmax(reference), _log_softmax(other)
    kl = (np.exp(p) * (p - q)).sum(-1)
    return {
        "positions": int(len(kl)),
        "top1_agreement": float(np.mean(reference.argmax(-1) == other.argmax(-1))),
        "kl_mean": float(kl.mean()),
        "kl_max": float(kl.max()),
    }


def first_difference(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def exact_margin(gguf: Path, ids: list[int], ours: list[int], theirs: list[int], k: int) -> dict:
    """Where the two part: the top two logits of the exact (float64, numpy) model of llama.cpp's
    definitions over the common prefix, so a near-tie shows as a small margin."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.gguf_reference import logits

    from winml_perf.convert.gguf_file import read_gguf

    last = logits(read_gguf(gguf), ids + ours[:k])[-1]
    return {
        "step": k,
        "exact_top1": int(last.argmax()),
        "bundle_token": ours[k],
        "llamacpp_token": theirs[k],
        "exact_logit_bundle_token": float(last[ours[k]]),
        "exact_logit_llamacpp_token": float(last[theirs[k]]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--screen", action="store_true", help="screen the longer candidate list (see above)")
    args = parser.parse_args()

    import llama_cpp
    import onnxruntime as ort
    import onnxruntime_genai as og

    t0 = time.perf_counter()
    llm = llama_cpp.Llama(
        str(args.gguf), n_ctx=1024, n_threads=args.threads, logits_all=True, verbose=False, n_batch=512
    )
    model = og.Model(str(args.bundle))
    tokenizer = og.Tokenizer(model)
    config = json.loads((args.bundle / "genai_config.json").read_text())
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    session = ort.InferenceSession(str(args.bundle / "model.onnx"), so)

    def llama_ids(text: str, special: bool) -> list[int]:
        return [int(t) for t in llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)]

    if args.screen:
        eos = config["model"]["eos_token_id"]
        cases = screen(llm, model, tokenizer, set(eos if isinstance(eos, list) else [eos]), llama_ids)
        same = [c["text"] for c in cases if c["first_difference"] is None]
        doc = {
            "command": " ".join(["python", *sys.argv]),
            "source": args.gguf.name,
            "source_sha256": _sha256(args.gguf),
            "versions": {"llama_cpp_python": llama_cpp.__version__, "onnxruntime_genai": og.__version__},
            "threads": args.threads,
            "new_tokens": NEW_TOKENS,
            "candidates": cases,
            "never_part": same,
            "seconds": round(time.perf_counter() - t0, 1),
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{len(same)}/{len(cases)} candidates: every token the same; {doc['seconds']} s", file=sys.stderr)
        return 0

    prompts = []
    for text, chat in [(t, False) for t in PLAIN] + [(t, True) for t in CHAT]:
        shown = shown_prompt(tokenizer, text, chat)
        ids = llama_ids(shown, special=True)
        bundle_ids = [int(t) for t in tokenizer.encode(shown)]
        ours = genai_greedy(model, ids, NEW_TOKENS)
        theirs, llama_logits = llama_greedy(llm, ids, NEW_TOKENS)
        forced = bundle_logits(session, config, ids + theirs)
        prompts.append(
            {
                "text": text,
                "chat_template": chat,
                "prompt": shown,
                "ids": ids,
                "bundle_tokenizer_ids_equal": bundle_ids == ids,
                "llamacpp_tokens": theirs,
                "bundle_tokens": ours,
                "first_difference": (k := first_difference(ours, theirs)),
                "where_they_part": None if k is None else exact_margin(args.gguf, ids, ours, theirs, k),
                "llamacpp_text": llm.detokenize(theirs).decode("utf-8", errors="replace"),
                "teacher_forced": compare_logits(llama_logits[: len(forced)], forced),
            }
        )
        print(f"{text[:40]!r}: first difference {prompts[-1]['first_difference']}", file=sys.stderr)
    tokenized, mismatches, library_mismatches = compare_tokenizers(llama_ids, tokenizer, args.bundle)
    all_forced = [p["teacher_forced"] for p in prompts]
    doc = {
        "command": " ".join(["python", *sys.argv]),
        "source": args.gguf.name,
        "source_sha256": _sha256(args.gguf),
        "bundle_gguf_json": json.loads((args.bundle / "gguf.json").read_text()),
        "versions": {
            "llama_cpp_python": llama_cpp.__version__,
            "onnxruntime": ort.__version__,
            "onnxruntime_genai": og.__version__,
            "python": platform.python_version(),
        },
        "threads": args.threads,
        "new_tokens": NEW_TOKENS,
        "prompts": prompts,
        "tokenizer": {
            "strings": len(tokenized),
            "special_tokens_parsed": True,
            "mismatches": mismatches,
            "tokenizers_library_mismatches": library_mismatches,
            "cases": tokenized,
        },
        "teacher_forced": {
            "top1_agreement_min": min(f["top1_agreement"] for f in all_forced),
            "kl_mean": float(np.mean([f["kl_mean"] for f in all_forced])),
            "kl_max": max(f["kl_max"] for f in all_forced),
        },
        "seconds": round(time.perf_counter() - t0, 1),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    same = sum(p["first_difference"] is None for p in prompts)
    print(
        f"{same}/{len(prompts)} prompts: every token the same; tokenizer: {len(mismatches)} of {len(tokenized)} "
        f"strings differ; teacher-forced top-1 >= {doc['teacher_forced']['top1_agreement_min']:.3f}, "
        f"KL mean {doc['teacher_forced']['kl_mean']:.4f}; {doc['seconds']} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
