"""What the simulated teams run: job templates, owners, images and the CronJobs of the cluster.

Templates carry the shape of real GPU work (a LoRA fine-tune wants one or two GPUs for an
hour or two, a pretraining run wants a whole 8-GPU node for most of a day, batch inference
wants a small MIG device for minutes), so the queue view shows the mix an operator sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuconsole.backends.sim import catalog

PYTORCH = "nvcr.io/nvidia/pytorch:24.05-py3"
PYTORCH_OLD = "nvcr.io/nvidia/pytorch:24.03-py3"
NEMO = "nvcr.io/nvidia/nemo:24.05"
TRITON = "nvcr.io/nvidia/tritonserver:24.05-py3"
VLLM = "vllm/vllm-openai:v0.4.2"
TGI = "ghcr.io/huggingface/text-generation-inference:2.0"

TEAMS: dict[str, tuple[str, ...]] = {
    "team-nlp": ("alice", "priya"),
    "team-vision": ("bob", "chen"),
    "research": ("priya", "dmitri", "fatima"),
    "inference": ("chen", "kenji", "sofia"),
}

PROJECT_BY_NAMESPACE: dict[str, str] = {
    "team-nlp": "nlp",
    "team-vision": "vision",
    "research": "research",
    "inference": "inference",
}


@dataclass(frozen=True, slots=True)
class JobTemplate:
    """One kind of job a team submits.

    Attributes:
        gpus: the whole-GPU counts it may ask for (ignored when ``mig_profile`` is set).
        product: a ``nvidia.com/gpu.product`` node selector, or None for any GPU.
        minutes: duration range; drawn log-uniformly so most runs are short, a few are long.
        weight: relative frequency among submissions.
    """

    namespace: str
    base: str
    gpus: tuple[int, ...]
    minutes: tuple[float, float]
    image: str
    weight: int
    mig_profile: str | None = None
    product: str | None = None


TEMPLATES: tuple[JobTemplate, ...] = (
    JobTemplate("team-nlp", "bert-finetune", (1, 1, 2), (20, 180), PYTORCH, 6),
    JobTemplate("team-nlp", "mistral-lora", (1, 2), (30, 240), PYTORCH, 5),
    JobTemplate("team-nlp", "llama-sft", (4, 8), (120, 600), NEMO, 2),
    JobTemplate("team-nlp", "tokenizer-train", (1,), (10, 40), PYTORCH_OLD, 2, product=catalog.T4.label),
    JobTemplate("team-vision", "resnet-train", (1, 2, 4), (30, 300), PYTORCH, 5),
    JobTemplate("team-vision", "vit-pretrain", (4, 8), (180, 720), PYTORCH, 2),
    JobTemplate("team-vision", "yolo-finetune", (1,), (20, 120), PYTORCH, 4),
    JobTemplate("team-vision", "sam-embed", (1,), (10, 60), PYTORCH, 3, mig_profile="2g.20gb"),
    JobTemplate("team-vision", "clip-eval", (1,), (5, 30), PYTORCH, 3, product=catalog.A10G.label),
    JobTemplate("research", "moe-ablation", (2, 4), (60, 360), PYTORCH, 3),
    JobTemplate("research", "scaling-sweep", (1, 2), (30, 180), PYTORCH, 4),
    JobTemplate("research", "sparse-attn-exp", (1,), (20, 120), PYTORCH, 2, mig_profile="3g.40gb"),
    JobTemplate("research", "grpo-exp", (8,), (60, 480), NEMO, 1, product=catalog.H100_80GB.label),
    JobTemplate("inference", "whisper-transcribe", (1,), (10, 90), TRITON, 4, product=catalog.T4.label),
    JobTemplate("inference", "embed-batch", (1,), (5, 30), TRITON, 4, mig_profile="1g.10gb"),
    JobTemplate("inference", "vllm-bench", (1,), (10, 60), VLLM, 3, product=catalog.L4.label),
    JobTemplate("inference", "tgi-batch", (1, 4), (20, 120), TGI, 3, product=catalog.A10G.label),
)

TEMPLATE_WEIGHTS: tuple[int, ...] = tuple(t.weight for t in TEMPLATES)


def fleet_cum_weights(gpus_by_product: dict[str, int]) -> list[float]:
    """Cumulative template weights for a fleet, for :meth:`random.Random.choices`.

    Teams ask for a GPU model in proportion to how much of it the fleet has: a template that
    selects a product holding under a tenth of the GPUs is scaled down, and one whose product
    is absent is never drawn, so a big training fleet is not flooded with T4 jobs that wait
    on its two T4 nodes.
    """
    total = sum(gpus_by_product.values()) or 1
    cum = []
    acc = 0.0
    for t in TEMPLATES:
        weight = float(t.weight)
        if t.product is not None:
            weight *= min(1.0, 10.0 * gpus_by_product.get(t.product, 0) / total)
        acc += weight
        cum.append(acc)
    return cum


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A CronJob of the default cluster and the job it stamps out."""

    name: str
    namespace: str
    schedule: str
    gpus: int
    minutes: tuple[float, float]
    image: str
    owner: str
    suspended: bool = False
    mig_profile: str | None = None
    product: str | None = None


CRONJOBS: tuple[CronSpec, ...] = (
    CronSpec("nightly-eval", "team-nlp", "0 2 * * *", 4, (20, 45), PYTORCH, "alice"),
    CronSpec("hourly-embeddings-refresh", "inference", "0 * * * *", 1, (5, 15), TRITON, "kenji",
             mig_profile="1g.10gb"),
    CronSpec("weekly-benchmark", "research", "0 6 * * 1", 8, (60, 120), NEMO, "fatima"),
    CronSpec("dataset-reindex", "team-vision", "30 */6 * * *", 1, (15, 40), PYTORCH, "bob",
             suspended=True),
)


def log_uniform_mean(lo: float, hi: float) -> float:
    """Mean of a log-uniform distribution on [lo, hi]."""
    return lo if hi <= lo else (hi - lo) / math.log(hi / lo)


def _mean_demand() -> tuple[float, float]:
    total = sum(TEMPLATE_WEIGHTS)
    gpus = 0.0
    seconds = 0.0
    for t in TEMPLATES:
        share = t.weight / total
        gpus += share * (1.0 / catalog.MIG_TOTAL_COMPUTE if t.mig_profile else sum(t.gpus) / len(t.gpus))
        seconds += share * 60.0 * log_uniform_mean(*t.minutes)
    return gpus, seconds


# Average GPUs one submission asks for and how long it runs: the arrival rate that keeps a
# fleet of a given size about as busy as a real one follows from these two.
MEAN_GPUS_PER_JOB, MEAN_JOB_SECONDS = _mean_demand()
