#!/usr/bin/env python3
"""bench_llm.py — FLUX.2's text encoders (issue #29 point 5): captions per
second of orakul's llm plugin through the text conditioner
(bench_llm_encode) against transformers, at the real shapes with random
bf16 weights, on the GPU machine (bench/text/llm_bench_gpu.sh runs it).

For each model (--which mistral,qwen3):
  1. the language model at its real shape (tests/reference/llm_encoder_ref.py's
     configs: Mistral-Small-3.x, hidden 5120, 32 / 8 heads of 128,
     intermediate 32768, vocab 131072, only the 30 layers FLUX.2-dev reads;
     Qwen3-4B, 27 of 36 layers) is made on the GPU with random bf16 weights
     and saved as shards of 4 layers + index under --dir (/dev/shm when it has
     room: 35 GB for Mistral);
  2. transformers' bf16 forward, resident, N captions in batches of --hf-batch
     (512 tokens each, left-padded like the pipeline's: the hidden states of
     the three layers stacked and copied back as F32, as orakul's rows are);
  3. with accelerate's cpu_offload (every module's weights from host memory at
     each forward: --offload-n captions, one batch) when accelerate imports and
     the time left before --deadline covers its estimate (the model back to
     the host, then every weight over the link from pageable memory per
     forward), after orakul's runs; else a row saying why it did not run;
  4. orakul, each a separate process reading the shards: resident bf16 (no
     budget), bf16 within --budget-gb (streamed: 32 GiB of weights), fp8
     (quantize_te qfloat8) within --budget-gb (Mistral's 30 layers are 16.8
     GiB in fp8: the plan keeps them resident at 24 GiB), and fp8 streamed
     at that budget by force (ORAKUL_TEXT_LAYER_MAJOR: fp8 on the link).
The pinned host->device rate is measured first (torch, 1 GiB): the
streamed runs' link efficiency is issue 8's, max(resident time, link-only
time) / streamed time, where link-only = the plan's link bytes at that rate,
and resident time the same dtype's resident run (the whole calls: the weights'
load included, since a streamed run's load is its link time).

One JSON line per run in --out; the table for docs/PERF.md on stdout.
--small: tiny widths on the CPU (a dry run of this script and the driver).
--make-only: only the shards (the seed's two-phase run reads them);
--headers-only: only their headers, sparse files of the real size (for
`orakul plan` at the real shape anywhere: bench/text/seed_two_phase_gpu.sh plan).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
from llm_encoder_ref import real_cfg  # noqa: E402  (the reference's configs: one source of the shapes)

TOK = {"mistral": os.path.join(ROOT, "tests/fixtures/text/tok_flux2/mistral"),
       "qwen3": os.path.join(ROOT, "tests/fixtures/text/tok_flux2/qwen3")}
VARIANT = {"mistral": "flux2-dev", "qwen3": "flux2-klein-4b"}
NAME = {"mistral": "Mistral-Small-3.x 24B (30 of 40 layers)", "qwen3": "Qwen3-4B (27 of 36 layers)"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pinned_gbs(device):
    if not device.startswith("cuda"):
        return 0.0
    x = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    y = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    best = 1e9
    for _ in range(4):
        torch.cuda.synchronize()
        t0 = time.time()
        y.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        best = min(best, time.time() - t0)
    del x, y
    return (1 << 30) / best / 1e9


def make_model(which, device, small):
    from transformers import MistralModel, Qwen3Model
    cfg, layers = real_cfg(which)
    if small:
        cfg.vocab_size = 131072 if which == "mistral" else 151936  # the tokenizer fixtures' ids
        cfg.hidden_size, cfg.intermediate_size, cfg.head_dim = 64, 96, 16
        cfg.num_attention_heads, cfg.num_key_value_heads = 4, 2
    full = cfg.num_hidden_layers
    cfg_json = json.loads(cfg.to_json_string())
    cfg.num_hidden_layers = max(layers)
    torch.manual_seed(29)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = (MistralModel if which == "mistral" else Qwen3Model)(cfg).eval()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" in n:
                p.copy_(0.5 + torch.rand_like(p, dtype=torch.float32))
    cfg_json["num_hidden_layers"] = full
    cfg_json["architectures"] = ["MistralForCausalLM" if which == "mistral" else "Qwen3ForCausalLM"]
    return model, cfg, layers, cfg_json


def save(model, cfg_json, d):
    from safetensors.torch import save_file
    os.makedirs(d, exist_ok=True)
    sd = model.state_dict()
    shards = {}
    for k in sd:
        shards.setdefault(int(k.split(".")[1]) // 4 + 1 if k.startswith("layers.") else 0, []).append(k)
    wmap, n = {}, len(shards)
    for j, (_, keys) in enumerate(sorted(shards.items())):
        fn = "model-%05d-of-%05d.safetensors" % (j + 1, n)
        save_file({"model." + k: sd[k].contiguous().cpu() for k in keys}, os.path.join(d, fn))
        for k in keys:
            wmap["model." + k] = fn
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=1)


def save_headers_only(which, d):
    """The shards' headers at the real shape with no data (sparse files: the
    data a hole of the right size), for `orakul plan` off the GPU machine."""
    import struct
    from transformers import MistralModel, Qwen3Model
    cfg, layers = real_cfg(which)
    full = cfg.num_hidden_layers
    cfg_json = json.loads(cfg.to_json_string())
    cfg.num_hidden_layers = max(layers)
    with torch.device("meta"):
        model = (MistralModel if which == "mistral" else Qwen3Model)(cfg)
    shards = {}
    for k, t in model.state_dict().items():
        shards.setdefault(int(k.split(".")[1]) // 4 + 1 if k.startswith("layers.") else 0, []).append((k, t.shape))
    os.makedirs(d, exist_ok=True)
    wmap, n = {}, len(shards)
    for j, (_, items) in enumerate(sorted(shards.items())):
        fn = "model-%05d-of-%05d.safetensors" % (j + 1, n)
        hdr, off = {}, 0
        for k, shape in items:
            nb = 2
            for x in shape:
                nb *= x
            hdr["model." + k] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + nb]}
            off += nb
            wmap["model." + k] = fn
        h = json.dumps(hdr).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(d, fn), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h)
            f.truncate(8 + len(h) + off)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wmap}, f)
    cfg_json["num_hidden_layers"] = full
    cfg_json["architectures"] = ["MistralForCausalLM" if which == "mistral" else "Qwen3ForCausalLM"]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=1)


def hf_encode(model, cfg, layers, n, batch, device, real_tokens=80, L=512):
    """n captions of L tokens (the last real_tokens real, left padding) in batches: seconds."""
    g = torch.Generator().manual_seed(7)
    caps = {}
    hooks = [model.layers[k - 1].register_forward_hook(
        lambda mod, a, o, k=k: caps.__setitem__(k, o[0] if isinstance(o, tuple) else o)) for k in layers]
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.time()
    done = 0
    with torch.no_grad():
        while done < n:
            b = min(batch, n - done)
            ids = torch.randint(0, cfg.vocab_size, (b, L), generator=g)
            mask = torch.zeros(b, L, dtype=torch.int64)
            mask[:, L - real_tokens:] = 1
            ids[mask == 0] = cfg.pad_token_id
            model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
            hs = torch.stack([caps[k] for k in layers], dim=1).permute(0, 2, 1, 3).reshape(b, L, -1)
            hs.float().cpu()
            done += b
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    for h in hooks:
        h.remove()
    return time.time() - t0


def run_orakul(a, which, d, tag, extra, timeout):
    cmd = [a.bin, "--weights", d, "--tok", TOK[which], "--captions", a.captions, "--variant", VARIANT[which],
           "--n", str(a.n), "--tag", tag, "--each"] + extra
    if a.small:
        cmd += ["--cpu", "--ctx", "192"]  # 3 x the tiny hidden 64
    log("==", " ".join(cmd))
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        log("== %s: timed out after %d s" % (tag, timeout))
        return {"impl": "orakul", "tag": tag, "error": "timeout %d s" % timeout}
    for line in p.stderr.splitlines():
        if "text encode" in line or "error" in line or line.startswith("  ") or "streamed" in line:
            log("   " + line)
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode or not rows:
        log("== %s: rc %d in %.0f s" % (tag, p.returncode, time.time() - t0))
        return {"impl": "orakul", "tag": tag, "error": "rc %d" % p.returncode}
    return rows[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--captions", default=os.path.join(ROOT, "tests/fixtures/text/captions.txt"))
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--hf-batch", type=int, default=16)
    ap.add_argument("--offload-n", type=int, default=16)
    ap.add_argument("--budget-gb", type=float, default=24)
    ap.add_argument("--which", default="mistral,qwen3")
    ap.add_argument("--cases", default="res,stream_bf16,fp8,stream_fp8")
    ap.add_argument("--out")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--timeout", type=int, default=150)
    ap.add_argument("--deadline", type=float, default=0,
                    help="epoch seconds the whole run must end by (the offload row is skipped when it cannot fit)")
    ap.add_argument("--keep", action="store_true", help="keep the shards")
    ap.add_argument("--make-only", action="store_true", help="only write the shards (random weights) under --dir")
    ap.add_argument("--headers-only", action="store_true", help="only write the shards' headers (sparse files)")
    a = ap.parse_args()
    if a.headers_only:
        for which in a.which.split(","):
            save_headers_only(which, os.path.join(a.dir, which))
        return
    if a.make_only:
        for which in a.which.split(","):
            t0 = time.time()
            model, cfg, layers, cfg_json = make_model(which, "cpu" if a.small else "cuda", a.small)
            save(model, cfg_json, os.path.join(a.dir, which))
            log("%s: made and saved in %.1f s to %s" % (which, time.time() - t0, os.path.join(a.dir, which)))
            del model
        return
    device = "cpu" if a.small else "cuda"
    import transformers
    log("torch", torch.__version__, "transformers", transformers.__version__, "device", device)
    res = {"gbs": pinned_gbs(device)}
    log("pinned host->device %.1f GB/s" % res["gbs"])
    out = open(a.out, "a")

    def emit(row):
        out.write(json.dumps(row) + "\n")
        out.flush()
        log("  ", json.dumps(row))

    try:
        import accelerate  # noqa: F401
        have_acc = True
    except Exception:  # not installed on the GPU machine: said in the table
        have_acc = False
    # the table whatever happens: the deadline's SIGTERM (timeout) ends the loop, not the report
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(143))
    try:
        run_all(a, res, emit, have_acc, device)
    finally:
        table(a, res, have_acc)


def run_all(a, res, emit, have_acc, device):
    import transformers
    if have_acc:
        from accelerate import cpu_offload
    for which in a.which.split(","):
        d = os.path.join(a.dir, which)
        t0 = time.time()
        model, cfg, layers, cfg_json = make_model(which, device, a.small)
        log("%s: made in %.1f s" % (which, time.time() - t0))
        t0 = time.time()
        save(model, cfg_json, d)
        log("%s: saved in %.1f s to %s" % (which, time.time() - t0, d))
        hf_encode(model, cfg, layers, min(a.hf_batch, a.n), a.hf_batch, device)  # warm-up (kernels, allocator)
        s = hf_encode(model, cfg, layers, a.n, a.hf_batch, device)
        emit({"impl": "transformers", "model": which, "dtype": "bf16", "captions": a.n, "batch": a.hf_batch,
              "seconds": s, "captions_per_s": a.n / s, "transformers": transformers.__version__})
        res[(which, "hf")] = a.n / s
        # orakul first (the rows that matter most, should the deadline cut the rest), transformers' model
        # kept on the device meanwhile (141 GB card: orakul's resident run takes ~40 GB beside it)
        cases = a.cases.split(",") if which == "mistral" else ["res"]
        for c in cases:
            bud = ["--budget-gb", str(a.budget_gb)]
            extra = {"res": [], "res_fp8": ["--quantize"], "fp8": bud + ["--quantize"],
                     "stream_bf16": bud, "stream_fp8": bud + ["--quantize", "--layer-major"]}[c]
            if a.small and c.startswith("stream"):  # tiny weights fit any budget: streamed by force
                extra = ["--layer-major"] + extra[2:]
            row = run_orakul(a, which, d, "%s_%s" % (which, c), extra, a.timeout)
            row["model"] = which
            emit(row)
            res[(which, c)] = row
        why = offload_skip(a, res, model, which, have_acc) if which == "mistral" else "-"
        if why and which == "mistral":
            res[(which, "offload_skip")] = why
            log("offload row not run: " + why)
        elif not why:
            try:
                t0 = time.time()
                model = model.to("cpu")
                if device.startswith("cuda"):
                    torch.cuda.empty_cache()
                cpu_offload(model, execution_device=torch.device(device if device != "cpu" else "cpu"))
                log("offload: cpu_offload set up in %.1f s (model to the host included)" % (time.time() - t0))
                s = hf_encode(model, cfg, layers, a.offload_n, a.hf_batch, device)
                emit({"impl": "transformers+accelerate.cpu_offload", "model": which, "dtype": "bf16",
                      "captions": a.offload_n, "batch": a.hf_batch, "seconds": s,
                      "captions_per_s": a.offload_n / s})
                res[(which, "offload")] = a.offload_n / s
            except Exception as e:
                log("offload failed: %r" % e)
                res[(which, "offload_err")] = repr(e)[:120]
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        if not a.keep:
            subprocess.run(["rm", "-rf", d])


def offload_skip(a, res, model, which, have_acc):
    """Why accelerate's cpu_offload row does not run (None: it runs)."""
    if not have_acc:
        return "accelerate is not installed on this machine (nor in .carry/wheels)"
    if "offload" in os.environ.get("BENCH_LLM_SKIP", ""):
        return "BENCH_LLM_SKIP=offload"
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    gbs = res["gbs"] or 10.0
    # the model to the host (~ the link's rate each way, pageable: a third of it), then one forward per batch
    # moving every weight up from pageable memory; 20 s for the hooks and the rest
    batches = (a.offload_n + a.hf_batch - 1) // a.hf_batch
    est = 20 + (1 + batches) * nbytes / (gbs / 3 * 1e9)
    left = a.deadline - time.time() if a.deadline else float("inf")
    if left < est + 15:
        return "%.0f s left before the deadline; it needs ~%.0f s (%.1f GB to the host, then over the link %d time%s " \
               "from pageable memory)" % (max(left, 0), est, nbytes / 1e9, batches, "" if batches == 1 else "s")
    return None


def fmt_row(r):
    if not r or "error" in r:
        return "failed (%s)" % (r or {}).get("error", "not run")
    return ("%.2f captions/s (%.1f s; weights to the device %.1f s; encode alone %.2f/s), peak %.1f GiB, chunk %d%s" %
            (r["captions_per_s"], r["seconds"], r["load_seconds"], r["encode_captions_per_s"], r["peak_gib"], r["chunk"],
             ", streamed%s: %d weight pass%s, %.1f GB over the link" % (
                 " through the block streamer" if r.get("streamer") else " block by block", r["passes"],
                 "" if r["passes"] == 1 else "es", r["link_gb"]) if r["layer_major"] else ""))


def table(a, res, have_acc):
    gbs = res["gbs"]
    print("| run | orakul | baseline, same run | ratio |")
    print("|---|---|---|---|")
    hdr = "**Text encode, FLUX.2** (random bf16 weights at the real shapes, %d captions x 512 tokens, " \
          "`--each` as `orakul run` calls it; pinned link %.1f GB/s measured)" % (a.n, gbs)
    print("| %s | | | |" % hdr)
    for which in a.which.split(","):
        hf = res.get((which, "hf"))
        r = res.get((which, "res"))
        ok = r and "error" not in r
        # transformers' model is already on the device: against orakul's encode alone (the whole call's
        # rate, its weights' load included, is in the orakul column)
        ratio = "%.2f (encode rate)" % (r["encode_captions_per_s"] / hf) if ok and hf else "-"
        print("| %s, resident bf16 | %s | transformers bf16 resident (weights on the device), batch %d: %.2f captions/s | %s |" %
              (NAME[which], fmt_row(r), a.hf_batch, hf or 0, ratio))
        if which != "mistral":
            continue
        r = res.get((which, "fp8"))
        if r:
            print("| %s, fp8 (quantize_te qfloat8) within %g GiB (%s as planned) | %s | resident bf16: %s | - |" %
                  (NAME[which], a.budget_gb, "streamed" if r.get("layer_major") else "resident", fmt_row(r),
                   fmt_row(res.get((which, "res"))).split(" (")[0]))
        for c, dt, base in (("stream_bf16", "bf16", "res"),
                            ("stream_fp8", "fp8 (quantize_te qfloat8), layer-major forced", "fp8")):
            r, rb = res.get((which, c)), res.get((which, base))
            if not r:
                continue
            eff = "-"
            if r and "error" not in r and rb and "error" not in rb and gbs > 0:
                link_only = r["link_gb"] / gbs
                eff = "eff. **%.2f** (max(resident %.1f s, link-only %.1f s) / %.1f s)" % (
                    max(rb["seconds"], link_only) / r["seconds"], rb["seconds"], link_only, r["seconds"])
            print("| %s, streamed within %g GiB, %s | %s | resident %s: %s | %s |" %
                  (NAME[which], a.budget_gb, dt, fmt_row(r), dt.split(" ")[0],
                   "%.2f captions/s" % rb["captions_per_s"] if rb and "error" not in rb else "failed", eff))
        off = res.get((which, "offload"))
        if off:
            r = res.get((which, "stream_bf16"))
            ratio = "%.1f (rate)" % (r["captions_per_s"] / off) if r and "error" not in r else "-"
            print("| the same, transformers + accelerate `cpu_offload` (weights from host memory every forward) | "
                  "orakul streamed bf16 above | %.3f captions/s (%d captions) | %s |" % (off, a.offload_n, ratio))
        elif res.get((which, "offload_skip")):
            print("| transformers + accelerate `cpu_offload` | not run: %s | | |" % res[(which, "offload_skip")])
        elif res.get((which, "offload_err")):
            print("| transformers + accelerate `cpu_offload` | failed: %s | | |" % res[(which, "offload_err")])


if __name__ == "__main__":
    main()
