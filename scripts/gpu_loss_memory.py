"""Models with their loss, as PyTorch's HF harness runs them (`huggingface.py --performance
--inference --bfloat16 --disable-cudagraphs`): the model class from its default config (the full
vocabulary), labels passed so the forward computes the loss, bf16, under no_grad. Per backend in
one process: peak memory of a warm call above what was allocated before it, the harness's
compression_ratio (eager peak / compiled peak, higher is better) and speedup (eager time /
compiled time), medians of interleaved rounds. --train: one training step instead (forward with
the loss, backward), float32 weights as the harness trains.

    python scripts/gpu_loss_memory.py BertForMaskedLM DistilBertForMaskedLM --batch 16 --seq 512
"""

import argparse
import json
import statistics

import torch

HARNESS_SIZES = {  # batch, sequence length (huggingface.py's choices for these models)
    "BertForMaskedLM": (16, 512),
    "DistilBertForMaskedLM": (16, 512),
    "BartForConditionalGeneration": (4, 1024),
    "GPT2LMHeadModel": (4, 1024),
    "AlbertForMaskedLM": (8, 512),
}


def build(name: str, batch: int, seq: int, dtype, device: str):
    import transformers

    cls = getattr(transformers, name)
    config = cls.config_class()
    if getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = 0
    model = cls(config).to(device, dtype)
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device)
    inputs = {"input_ids": ids, "labels": ids.clone()}
    if "Bart" in name:
        ids[:, -1] = config.eos_token_id
    return model, inputs


def run(name: str, args) -> dict:
    import coil

    batch, seq = HARNESS_SIZES.get(name, (args.batch, args.seq))
    batch, seq = args.batch or batch, args.seq or seq
    dtype = torch.float32 if args.train else torch.bfloat16
    torch._dynamo.reset()
    coil.reset()
    model, inputs = build(name, batch, seq, dtype, "cuda")
    model.train(args.train)
    row = {"model": name, "batch": batch, "seq": seq, "train": args.train}
    steps = {}
    for backend in ("eager", "inductor", "coil"):
        fn = model if backend == "eager" else torch.compile(model, backend=backend)

        def step(fn=fn):
            if args.train:
                model.zero_grad(set_to_none=True)
                fn(**inputs).loss.backward()
            else:
                with torch.no_grad():
                    return fn(**inputs).loss

        try:
            step()
            step()
        except Exception as e:  # noqa: BLE001 - the crash is the finding
            row[f"{backend}_crash"] = f"{type(e).__name__}: {e}"[:400]
            continue
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        row[f"{backend}_peak_mb"] = round((torch.cuda.max_memory_allocated() - base) / 2**20, 1)
        steps[backend] = step
    times = {k: [] for k in steps}
    for _ in range(args.rounds):
        for k, f in steps.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            torch.cuda.synchronize()
            times[k].append(start.elapsed_time(end))
    for k, v in times.items():
        row[f"{k}_ms"] = round(statistics.median(v), 3)
    for k in ("inductor", "coil"):
        if f"{k}_peak_mb" in row and "eager_peak_mb" in row:
            row[f"{k}_compression"] = round(row["eager_peak_mb"] / row[f"{k}_peak_mb"], 3)
        if f"{k}_ms" in row and "eager_ms" in row:
            row[f"{k}_speedup"] = round(row["eager_ms"] / row[f"{k}_ms"], 3)
    row["coil_eager_graphs"] = [g.eager_reason[:200] for g in coil.compiled_graphs()
                                if g.eager_fallback]
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--seq", type=int, default=0)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--train", action="store_true")
    p.add_argument("--json", default="")
    args = p.parse_args()
    rows = []
    for name in args.models:
        row = run(name, args)
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
