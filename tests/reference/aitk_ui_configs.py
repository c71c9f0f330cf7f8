#!/usr/bin/env python3
"""aitk_ui_configs.py — writes the job configs ai-toolkit's web UI saves for the
architectures orakul trains, into tests/fixtures/aitk_ui/ (tests/config's
test_aitk_ui plans each one and asserts the exact set of "ignored:" warnings).

What the UI saves, as read from ostris/ai-toolkit (commit 27a03a91, 2026-08-21):
  - ui/src/app/jobs/new/jobConfig.ts: defaultJobConfig (job/config/process
    nesting, meta, every default key; its model.arch is 'flex1') and the
    dataset default (defaultDatasetConfig);
  - ui/src/helpers/defaultSamples.ts: defaultSampleConfig;
  - ui/src/app/jobs/new/utils.ts: handleModelArchChange, which the "Model
    Architecture" select runs: low_vram false unless the arch has the section,
    layer_offloading + both percents added when it has 'model.layer_offloading',
    the datasets' controls / control paths / num_frames, each sample's ctrl_img,
    then the previous arch's defaults reverted ([1]) and the new one's set ([0]);
  - ui/src/app/jobs/new/options.tsx: modelArchs[].defaults and additionalSections
    of flex1 (the starting arch), flux, flux2, flux2_klein_4b, flux2_klein_9b,
    zimage:turbo (with its training adapter, model.assistant_lora_path), zimage and
    zimage:deturbo (text encoder and VAE from model.extras_name_or_path);
  - ui/cron/actions/startJob.ts: the file the job runs from is
    <training folder>/<name>/.job_config.json, JSON.stringify(jobConfig, null, 2),
    with process[0].sqlite_db_path set to <toolkit root>/aitk_db.db.
FLUX.1-schnell has no arch of its own in the UI: a user picks FLUX.1 and types
the schnell repo, with the settings config/examples/train_lora_flux_schnell_24gb.yaml
gives (assistant_lora_path, guidance 1, 4 sample steps).

Run from anywhere: python3 tests/reference/aitk_ui_configs.py [OUT_DIR]
Deterministic; key order is the UI's, numbers as JavaScript writes them (1.0 -> 1)."""
import copy
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "fixtures", "aitk_ui")

# ---- jobConfig.ts -----------------------------------------------------------
DEFAULT_DATASET = {
    "folder_path": "/path/to/images/folder",
    "mask_path": None,
    "mask_min_value": 0.1,
    "default_caption": "",
    "caption_ext": "txt",
    "caption_dropout_rate": 0.05,
    "cache_latents_to_disk": False,
    "is_reg": False,
    "network_weight": 1,
    "resolution": [512, 768, 1024],
    "controls": [],
    "shrink_video_to_frames": True,
    "num_frames": 1,
    "flip_x": False,
    "flip_y": False,
    "num_repeats": 1,
}

# ---- defaultSamples.ts --------------------------------------------------------
DEFAULT_SAMPLE = {
    "sampler": "flowmatch",
    "sample_every": 250,
    "sample_start_step": 0,
    "width": 1024,
    "height": 1024,
    "samples": [
        {"prompt": "woman with red hair, playing chess at the park, bomb going off in the background"},
        {"prompt": "a woman holding a coffee cup, in a beanie, sitting at a cafe"},
        {"prompt": "a horse is a DJ at a night club, fish eye lens, smoke machine, lazer lights, holding a martini"},
        {"prompt": "a man showing off his cool new t shirt at the beach, a shark is jumping out of the water in the background"},
        {"prompt": "a bear building a log cabin in the snow covered mountains"},
        {"prompt": "woman playing the guitar, on stage, singing a song, laser lights, punk rocker"},
        {"prompt": "hipster man with a beard, building a chair, in a wood shop"},
        {"prompt": "photo of a man, white background, medium shot, modeling clothing, studio lighting, white backdrop"},
        {"prompt": "a man holding a sign that says, 'this is a sign'"},
        {"prompt": "a bulldog, in a post apocalyptic world, with a shotgun, in a leather jacket, in a desert, with a motorcycle"},
    ],
    "neg": "",
    "seed": 42,
    "walk_seed": True,
    "guidance_scale": 4,
    "sample_steps": 30,
    "num_frames": 1,
    "fps": 1,
}

DEFAULT_JOB = {
    "job": "extension",
    "config": {
        "name": "my_first_lora_v1",
        "process": [
            {
                "type": "diffusion_trainer",
                "training_folder": "output",
                "sqlite_db_path": "./aitk_db.db",
                "device": "cuda",
                "trigger_word": None,
                "performance_log_every": 10,
                "network": {
                    "type": "lora",
                    "linear": 32,
                    "linear_alpha": 32,
                    "conv": 16,
                    "conv_alpha": 16,
                    "lokr_full_rank": True,
                    "lokr_factor": -1,
                    "network_kwargs": {"ignore_if_contains": []},
                },
                "save": {
                    "dtype": "bf16",
                    "save_every": 250,
                    "max_step_saves_to_keep": 4,
                    "save_format": "diffusers",
                    "push_to_hub": False,
                },
                "datasets": [DEFAULT_DATASET],
                "train": {
                    "batch_size": 1,
                    "bypass_guidance_embedding": True,
                    "steps": 3000,
                    "gradient_accumulation": 1,
                    "train_unet": True,
                    "train_text_encoder": False,
                    "gradient_checkpointing": True,
                    "noise_scheduler": "flowmatch",
                    "optimizer": "adamw8bit",
                    "timestep_type": "sigmoid",
                    "content_or_style": "balanced",
                    "optimizer_params": {"weight_decay": 1e-4},
                    "unload_text_encoder": False,
                    "cache_text_embeddings": False,
                    "lr": 0.0001,
                    "ema_config": {"use_ema": False, "ema_decay": 0.99},
                    "skip_first_sample": False,
                    "force_first_sample": False,
                    "disable_sampling": False,
                    "dtype": "bf16",
                    "diff_output_preservation": False,
                    "diff_output_preservation_multiplier": 1.0,
                    "diff_output_preservation_class": "person",
                    "switch_boundary_every": 1,
                    "loss_type": "mse",
                },
                "logging": {"log_every": 1, "use_ui_logger": True},
                "model": {
                    "name_or_path": "ostris/Flex.1-alpha",
                    "quantize": True,
                    "qtype": "qfloat8",
                    "quantize_te": True,
                    "qtype_te": "qfloat8",
                    "arch": "flex1",
                    "low_vram": False,
                    "model_kwargs": {},
                    "compile": False,
                },
                "sample": DEFAULT_SAMPLE,
            }
        ],
    },
    "meta": {"name": "[name]", "version": "1.0"},
}

# ---- options.tsx (the archs a FLUX job passes through) ------------------------
P = "config.process[0]."
FLUX2_LIKE_SECTIONS = ["datasets.multi_control_paths", "sample.multi_ctrl_imgs", "model.low_vram",
                       "model.layer_offloading", "model.qie.match_target_res"]


def flux2_like(repo):
    return {
        "defaults": {
            P + "model.name_or_path": [repo, ""],
            P + "model.quantize": [True, False],
            P + "model.quantize_te": [True, False],
            P + "model.low_vram": [True, False],
            P + "train.unload_text_encoder": [False, False],
            P + "sample.sampler": ["flowmatch", "flowmatch"],
            P + "train.noise_scheduler": ["flowmatch", "flowmatch"],
            P + "train.timestep_type": ["weighted", "sigmoid"],
            P + "model.qtype": ["qfloat8", "qfloat8"],
            P + "model.model_kwargs": [{"match_target_res": False}, {}],
        },
        "sections": FLUX2_LIKE_SECTIONS,
    }


def zimage_like(repo, extra, sections=()):
    """options.tsx zimage:turbo / zimage / zimage:deturbo, read at ostris/ai-toolkit 127d6f62 (newer
    than the commit above; its flex1, flux, flux2 and flux2_klein_4b entries are the
    ones here): the FLUX.2 defaults less model_kwargs, plus the arch's own. None
    stands for the UI's undefined, only in an unselected value ([1]), which no job
    here applies (each starts from flex1)."""
    d = {
        P + "model.name_or_path": [repo, ""],
        P + "model.quantize": [True, False],
        P + "model.quantize_te": [True, False],
        P + "model.low_vram": [True, False],
        P + "train.unload_text_encoder": [False, False],
        P + "sample.sampler": ["flowmatch", "flowmatch"],
        P + "train.noise_scheduler": ["flowmatch", "flowmatch"],
        P + "train.timestep_type": ["weighted", "sigmoid"],
        P + "model.qtype": ["qfloat8", "qfloat8"],
    }
    d.update(extra)
    return {"defaults": d, "sections": ["model.low_vram", "model.layer_offloading"] + list(sections)}


ARCHS = {
    "flex1": {
        "defaults": {
            P + "model.name_or_path": ["ostris/Flex.1-alpha", ""],
            P + "model.quantize": [True, False],
            P + "model.quantize_te": [True, False],
            P + "train.bypass_guidance_embedding": [True, False],
            P + "sample.sampler": ["flowmatch", "flowmatch"],
            P + "train.noise_scheduler": ["flowmatch", "flowmatch"],
        },
        "sections": [],
    },
    "flux": {
        "defaults": {
            P + "model.name_or_path": ["black-forest-labs/FLUX.1-dev", ""],
            P + "model.quantize": [True, False],
            P + "model.quantize_te": [True, False],
            P + "sample.sampler": ["flowmatch", "flowmatch"],
            P + "train.noise_scheduler": ["flowmatch", "flowmatch"],
        },
        "sections": [],
    },
    "flux2": flux2_like("black-forest-labs/FLUX.2-dev"),
    "flux2_klein_4b": flux2_like("black-forest-labs/FLUX.2-klein-base-4B"),
    "flux2_klein_9b": flux2_like("black-forest-labs/FLUX.2-klein-base-9B"),
    "zimage:turbo": zimage_like("Tongyi-MAI/Z-Image-Turbo", {
        P + "model.assistant_lora_path": [
            "ostris/zimage_turbo_training_adapter/zimage_turbo_training_adapter_v2.safetensors", None],
        P + "sample.guidance_scale": [1, 4],
        P + "sample.sample_steps": [9, 25],
    }, ["model.assistant_lora_path"]),
    "zimage": zimage_like("Tongyi-MAI/Z-Image", {P + "sample.sample_steps": [30, 25]}),
    "zimage:deturbo": zimage_like("ostris/Z-Image-De-Turbo", {
        P + "model.extras_name_or_path": ["Tongyi-MAI/Z-Image-Turbo", None],
        P + "sample.guidance_scale": [3, 4],
        P + "sample.sample_steps": [25, 25],
    }),
}


def path_parts(path):
    return [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]


def set_at(obj, path, value):
    """The UI's setJobConfig(value, path); undefined (None here only where the UI
    passes undefined) is not used by the archs we generate."""
    parts = path_parts(path)
    for p in parts[:-1]:
        obj = obj[p]
    obj[parts[-1]] = copy.deepcopy(value)


def change_arch(job, new):
    """utils.ts handleModelArchChange(current, new, jobConfig, setJobConfig)."""
    proc = job["config"]["process"][0]
    cur = ARCHS[proc["model"]["arch"]]
    arch = ARCHS[new]
    if "model.low_vram" not in arch["sections"]:
        proc["model"]["low_vram"] = False
    if "model.layer_offloading" not in arch["sections"]:
        for k in ("layer_offloading", "layer_offloading_text_encoder_percent", "layer_offloading_transformer_percent"):
            proc["model"].pop(k, None)
    elif "layer_offloading" not in proc["model"]:
        proc["model"]["layer_offloading"] = False
        proc["model"]["layer_offloading_text_encoder_percent"] = 1.0
        proc["model"]["layer_offloading_transformer_percent"] = 1.0
    proc["model"]["arch"] = new
    multi = "datasets.multi_control_paths" in arch["sections"]
    single = "datasets.control_path" in arch["sections"]
    for d in proc["datasets"]:
        d["controls"] = []
        if multi:
            for k in ("control_path_1", "control_path_2", "control_path_3"):
                d[k] = d.get(k) or None
            d.pop("control_path", None)
        elif single:
            d["control_path"] = d.get("control_path") or None
        else:
            for k in ("control_path", "control_path_1", "control_path_2", "control_path_3"):
                d.pop(k, None)
        if "datasets.num_frames" not in arch["sections"]:
            d["num_frames"] = 1
        d.pop("auto_frame_count", None)
    if "sample.ctrl_img" not in arch["sections"]:
        for s in proc["sample"]["samples"]:
            s.pop("ctrl_img", None)
    for k, v in cur["defaults"].items():
        set_at(job, k, v[1])
    for k, v in arch["defaults"].items():
        set_at(job, k, v[0])


def ui_job(arch, name):
    job = copy.deepcopy(DEFAULT_JOB)
    job["config"]["name"] = name
    change_arch(job, arch)
    # startJob.ts: the path of the toolkit's database
    job["config"]["process"][0]["sqlite_db_path"] = "/ai-toolkit/aitk_db.db"
    return job


def js(v):
    """Numbers as JSON.stringify writes them: an integral float has no '.0'."""
    if isinstance(v, dict):
        return {k: js(x) for k, x in v.items()}
    if isinstance(v, list):
        return [js(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def main():
    os.makedirs(OUT, exist_ok=True)
    jobs = {
        "flux1_dev": ui_job("flux", "flux1_dev_lora"),
        "flux2_dev": ui_job("flux2", "flux2_dev_lora"),
        "flux2_klein_4b": ui_job("flux2_klein_4b", "flux2_klein_4b_lora"),
        "flux2_klein_9b": ui_job("flux2_klein_9b", "flux2_klein_9b_lora"),
        "zimage_turbo": ui_job("zimage:turbo", "zimage_turbo_lora"),
        "zimage": ui_job("zimage", "zimage_lora"),
        "zimage_deturbo": ui_job("zimage:deturbo", "zimage_deturbo_lora"),
    }
    # FLUX.1-schnell: the FLUX.1 arch with the schnell repo and the example's settings
    s = ui_job("flux", "flux1_schnell_lora")
    pr = s["config"]["process"][0]
    pr["model"]["name_or_path"] = "black-forest-labs/FLUX.1-schnell"
    pr["model"]["assistant_lora_path"] = "ostris/FLUX.1-schnell-training-adapter"
    pr["sample"]["guidance_scale"] = 1
    pr["sample"]["sample_steps"] = 4
    jobs["flux1_schnell"] = s
    # FLUX.2-dev with the form's options switched on (SimpleJob.tsx: the setJobConfig paths
    # of its inputs): what orakul implements stays quiet, each one it does not warns
    o = ui_job("flux2", "flux2_dev_options_lora")
    pr = o["config"]["process"][0]
    pr["trigger_word"] = "ohwx"
    pr["network"]["linear"], pr["network"]["linear_alpha"] = 16, 8
    pr["model"]["layer_offloading"] = True
    pr["model"]["layer_offloading_transformer_percent"] = 0.5
    pr["model"]["layer_offloading_text_encoder_percent"] = 0.5
    pr["model"]["model_kwargs"]["match_target_res"] = True
    d = pr["datasets"][0]
    d["control_path_1"] = "/path/to/controls"
    d["cache_latents_to_disk"] = True
    d["caption_dropout_rate"] = 0.1
    d["num_repeats"] = 2
    d["flip_x"] = True
    t = pr["train"]
    t["ema_config"]["use_ema"] = True
    t["diff_output_preservation"] = True
    t["cache_text_embeddings"] = True
    t["gradient_accumulation"] = 2
    t["content_or_style"] = "content"
    t["skip_first_sample"] = True
    pr["sample"]["samples"][0]["ctrl_img_1"] = "/path/to/control.png"
    pr["sample"]["samples"][0]["network_multiplier"] = 0.8
    pr["sample"]["samples"][1]["seed"] = 7
    jobs["flux2_dev_options"] = o
    for name, job in jobs.items():
        path = os.path.join(OUT, name + ".json")
        with open(path, "w") as f:
            f.write(json.dumps(js(job), indent=2) + "\n")  # JSON.stringify(jobConfig, null, 2)
        print("wrote", path)


if __name__ == "__main__":
    main()
