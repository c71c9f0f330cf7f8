#!/usr/bin/env python3
"""bench/text/bench_text.py — FLUX.1's text encode (T5-XXL -> txt, CLIP-L -> vec)
in captions per second and peak memory: transformers against orakul's text
conditioner (bench_text_encode), bf16 and fp8, at the real shapes with random
weights, in one run on one GPU. One JSON line per run on stdout, also appended
to --out.

  bash bench/text/run_gpu.sh            (builds with CUDA, then runs this)
  python3 bench/text/bench_text.py --bin build-gpu/bench/text/bench_text_encode

What it does:
  1. --work (default /tmp/orakul_text_bench): makes, once, random-weight
     T5-XXL (T5EncoderModel, 24 layers, d_model 4096; sharded safetensors and
     its index, bf16, as text_encoder_2/ comes) and CLIP-L (CLIPTextModel,
     bf16) with transformers' own init, and the tokenizers: T5's from
     tests/fixtures/text/tok/t5 (a Unigram of 2,203 pieces: ids are what
     matter, not the vocabulary), CLIP's vocab.json + merges.txt built from
     open_clip's bpe_simple_vocab_16e6.txt.gz (tests/fixtures/text/tok/clip,
     CLIP's real BPE).
  2. transformers: load both (bf16; fp8 = optimum-quanto qfloat8 weights on
     T5, as ai-toolkit's quantize_te: `quantize(t5, weights=qfloat8);
     freeze(t5)` — the wheel from .carry/wheels, see run_gpu.sh —, else
     torchao float8 weight-only, else that line says skipped), tokenize (fast
     tokenizers, max_length 512 / 77, padded), encode in batches of --hf-batch
     under no_grad with eager attention (T5 has no SDPA path with its position
     bias), synchronise. seconds = load + quantize + tokenize + encode;
     encode_seconds alone too; peak_gib = torch.cuda.max_memory_allocated over
     the whole call (quanto quantizes after a bf16 load: load_peak_gib),
     encode_peak_gib = after the load (weights + activations). quanto's
     Marlin FP8 kernel (a CUDA extension built with ninja + nvcc at first use,
     minutes) is off unless --quanto-marlin: a qfloat8 weight is then
     dequantized to bf16 at each matmul (quanto's qbytes_mm, plain torch).
  3. orakul: bench_text_encode bf16 and fp8 (--quantize qfloat8) with no
     budget (resident, chunks of up to 64 captions), fp8 within
     --fp8-budget-gb (6: the issue's target), and bf16 within --budget-gb (4:
     the bf16 T5 does not fit, so it runs layer-major, one block's weights at
     a time), and bf16 at --sweep chunk sizes (8,16,64: where a bigger chunk
     stops paying); each prints its JSON line (seconds = the whole call,
     peak_gib = the allocator's high-water mark, retries = chunks the
     budget refused: 0 when the plan is right, act_peak_gib /
     act_planned_gib = the activations' peak and what the plan sized).
Options: --n 256 captions (tests/fixtures/text/captions.txt, cycled),
--t5-layers 24, --hf-batch 16, --skip-hf, --skip-orakul, --out FILE
(default $OUT/text_bench.jsonl when $OUT is set, else ./text_bench.jsonl).
Targets (issue #28.4): faster than transformers; T5-XXL fp8 peak under 6 GiB.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FX = os.path.join(ROOT, "tests", "fixtures", "text")
DEV = "cuda"  # main() sets "cpu" without a GPU: a smoke run of the script (--n 2 --t5-layers 1)


def emit(out, d):
    line = json.dumps(d)
    print(line, flush=True)
    with open(out, "a") as f:
        f.write(line + "\n")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def make_tokenizers(work):
    t5d, cld = os.path.join(work, "tokenizer_2"), os.path.join(work, "tokenizer")
    os.makedirs(t5d, exist_ok=True)
    os.makedirs(cld, exist_ok=True)
    if not os.path.exists(os.path.join(t5d, "tokenizer.json")):
        with gzip.open(os.path.join(FX, "tok", "t5", "tokenizer.json.gz"), "rb") as f, \
                open(os.path.join(t5d, "tokenizer.json"), "wb") as g:
            g.write(f.read())
    if not os.path.exists(os.path.join(cld, "vocab.json")):
        # open_clip's SimpleTokenizer vocabulary, with transformers' special names
        merges = gzip.open(os.path.join(FX, "tok", "clip", "bpe_simple_vocab_16e6.txt.gz")).read().decode("utf-8")
        merges = merges.split("\n")[1:49152 - 256 - 2 + 1]
        merges = [tuple(m.split()) for m in merges]
        vocab = list(bytes_to_unicode().values())
        vocab = vocab + [v + "</w>" for v in vocab]
        vocab += ["".join(m) for m in merges]
        vocab += ["<|startoftext|>", "<|endoftext|>"]
        with open(os.path.join(cld, "vocab.json"), "w") as f:
            json.dump({v: i for i, v in enumerate(vocab)}, f)
        with open(os.path.join(cld, "merges.txt"), "w") as f:
            f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
        with open(os.path.join(cld, "tokenizer_config.json"), "w") as f:
            json.dump({"pad_token": "<|endoftext|>", "model_max_length": 77}, f)
    return t5d, cld


def make_weights(work, t5_layers):
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel
    t5d, cld = os.path.join(work, "t5"), os.path.join(work, "clip")
    if not os.path.exists(os.path.join(t5d, "config.json")):
        tc = T5Config(vocab_size=32128, d_model=4096, d_kv=64, num_heads=64, d_ff=10240, num_layers=t5_layers,
                      num_decoder_layers=t5_layers, relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6,
                      dropout_rate=0.0, tie_word_embeddings=False)
        torch.manual_seed(0)
        with torch.device(DEV):
            m = T5EncoderModel(tc).to(torch.bfloat16)
        m.save_pretrained(t5d, safe_serialization=True, max_shard_size="5GB")
        del m
    if not os.path.exists(os.path.join(cld, "config.json")):
        cc = CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                            num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                            layer_norm_eps=1e-5, bos_token_id=49406, eos_token_id=49407, pad_token_id=49407,
                            projection_dim=768)
        torch.manual_seed(1)
        with torch.device(DEV):
            m = CLIPTextModel(cc).to(torch.bfloat16)
        m.save_pretrained(cld, safe_serialization=True)
        del m
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return t5d, cld


def read_captions(n):
    with open(os.path.join(FX, "captions.txt"), "rb") as f:
        lines = [l.decode("utf-8", "replace").rstrip("\r\n") for l in f.read().split(b"\n")]
    lines = [l for l in lines] or [""]
    return [lines[i % len(lines)] for i in range(n)]


def run_hf(a, t5d, cld, t5tok, cltok, caps, dtype):
    import torch
    from tokenizers import Tokenizer
    from transformers import CLIPTextModel, CLIPTokenizerFast, T5EncoderModel
    cuda = DEV == "cuda"
    load_peak = 0
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    t5 = T5EncoderModel.from_pretrained(t5d, torch_dtype=torch.bfloat16, attn_implementation="eager").to(DEV).eval()
    clip = CLIPTextModel.from_pretrained(cld, torch_dtype=torch.bfloat16).to(DEV).eval()
    how = "bf16"
    if dtype == "fp8":
        try:
            from optimum.quanto import freeze, qfloat8, quantize
            if not a.quanto_marlin:
                # quanto's Marlin FP8 kernel is a CUDA extension compiled at first use (minutes, ninja + nvcc):
                # without it a qfloat8 weight is dequantized to bf16 at each matmul (qbytes_mm, plain torch)
                import optimum.quanto.tensor.weights.qbytes as qb
                qb.is_extension_available = lambda name: False
            quantize(t5, weights=qfloat8)
            freeze(t5)
            how = "quanto qfloat8" + (" (marlin)" if a.quanto_marlin else " (dequantize per matmul)")
        except ImportError:
            try:
                from torchao.quantization import float8_weight_only, quantize_
                quantize_(t5, float8_weight_only())
                how = "torchao float8_weight_only"
            except ImportError:
                del t5, clip
                return {"impl": "transformers", "dtype": "fp8", "skipped": "neither optimum-quanto nor torchao"}
    tt = Tokenizer.from_file(os.path.join(t5tok, "tokenizer.json"))
    tt.enable_truncation(max_length=512)
    tt.enable_padding(length=512, pad_id=0, pad_token="<pad>")
    ct = CLIPTokenizerFast(vocab_file=os.path.join(cltok, "vocab.json"), merges_file=os.path.join(cltok, "merges.txt"),
                           pad_token="<|endoftext|>")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        load_peak = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()  # the encode's own peak next (weights + activations)
    t1 = time.perf_counter()
    ids5 = torch.tensor([e.ids for e in tt.encode_batch(caps)], dtype=torch.long)
    idsc = ct(caps, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    B = a.hf_batch
    with torch.no_grad():
        for i in range(0, len(caps), B):
            h = t5(input_ids=ids5[i:i + B].to(DEV)).last_hidden_state
            v = clip(input_ids=idsc[i:i + B].to(DEV)).pooler_output
            _ = (h.float().cpu(), v.float().cpu())  # as orakul: F32 on the host
    if cuda:
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    d = {"impl": "transformers", "dtype": dtype, "how": how, "device": torch.cuda.get_device_name() if cuda else "cpu",
         "captions": len(caps), "T": 512, "seconds": round(t2 - t0, 3),
         "captions_per_s": round(len(caps) / (t2 - t0), 2), "encode_seconds": round(t2 - t1, 3),
         "encode_captions_per_s": round(len(caps) / (t2 - t1), 2),
         "peak_gib": round(max(load_peak, torch.cuda.max_memory_allocated()) / 2**30, 3) if cuda else None,
         "encode_peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3) if cuda else None,
         "load_peak_gib": round(load_peak / 2**30, 3) if cuda else None, "batch": B,
         "finite": bool(torch.isfinite(h).all().item())}
    del t5, clip
    if cuda:
        torch.cuda.empty_cache()
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-gpu", "bench", "text", "bench_text_encode"))
    ap.add_argument("--work", default="/tmp/orakul_text_bench")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--t5-layers", type=int, default=24)
    ap.add_argument("--hf-batch", type=int, default=16)
    ap.add_argument("--budget-gb", type=float, default=4.0)
    ap.add_argument("--fp8-budget-gb", type=float, default=6.0)
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--skip-orakul", action="store_true")
    ap.add_argument("--sweep", type=lambda v: [int(x) for x in v.split(",") if x], default=[8, 16, 64],
                    help="bf16 resident runs at these captions per chunk (ORAKUL_TEXT_CHUNK), '' for none")
    ap.add_argument("--quanto-marlin", action="store_true",
                    help="let quanto build and use its Marlin FP8 CUDA kernel (compiled at first use: minutes)")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "text_bench.jsonl"))
    a = ap.parse_args()
    global DEV
    import torch
    DEV = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(a.work, exist_ok=True)
    t5tok, cltok = make_tokenizers(a.work)
    t5d, cld = make_weights(a.work, a.t5_layers)
    caps = read_captions(a.n)
    capf = os.path.join(a.work, "captions.txt")
    with open(capf, "w") as f:
        f.write("\n".join(c.replace("\n", " ") for c in caps) + "\n")
    if not a.skip_orakul:
        base = [a.bin, "--t5", t5d, "--t5-tok", t5tok, "--clip", cld, "--clip-tok", cltok, "--captions", capf,
                "--n", str(a.n), "--T", "512"]
        runs = [("bf16", [], {}), ("fp8", ["--quantize"], {}),
                ("fp8 within %g GiB" % a.fp8_budget_gb, ["--quantize", "--budget-gb", str(a.fp8_budget_gb)], {}),
                ("bf16 within %g GiB (layer-major)" % a.budget_gb, ["--budget-gb", str(a.budget_gb)], {})]
        # the chunk where throughput stops improving (the default caps a chunk at 16384 tokens: 32 captions)
        runs += [("bf16 chunk %d" % c, [], {"ORAKUL_TEXT_CHUNK": str(c)}) for c in a.sweep]
        for tag, extra, env in runs:
            p = subprocess.run(base + extra + ["--tag", tag], capture_output=True, text=True,
                               env=dict(os.environ, **env))
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode or not lines:
                emit(a.out, {"impl": "orakul", "tag": tag, "failed": p.returncode, "stderr": p.stderr[-2000:]})
            for l in lines:
                d = json.loads(l)
                d["t5_layers"] = a.t5_layers
                emit(a.out, d)
            sys.stderr.write(p.stderr[-3000:])
    if not a.skip_hf:
        for dt in ("bf16", "fp8"):
            try:
                d = run_hf(a, t5d, cld, t5tok, cltok, caps, dt)
            except Exception as e:  # one line, the other runs go on
                d = {"impl": "transformers", "dtype": dt, "failed": repr(e)[:500]}
            d["t5_layers"] = a.t5_layers
            emit(a.out, d)


if __name__ == "__main__":
    main()
