"""The manifests a job request becomes, exactly, and what the form refuses, field by field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import yaml

from gpuconsole.core.ops.manifests import (
    DEFAULT_IMAGE,
    JobRequest,
    cron_expression,
    from_form,
    manifests,
    next_runs,
    parse_command,
    parse_env,
    to_yaml,
    validate,
)

MANAGED = {"app.kubernetes.io/managed-by": "gpuconsole"}
DSHM_MOUNT = [{"name": "dshm", "mountPath": "/dev/shm"}]
DSHM = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]

# A one-pod fine-tune: two GPUs, CPU and memory, two presets, a free variable.
JOB_REQUEST = JobRequest(
    name="bert-finetune", namespace="team-nlp", command=("python", "train.py", "--epochs", "3"), gpus=2,
    cpu="8", memory="64Gi", presets=(("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"), ("NCCL_DEBUG", "INFO")),
    env=(("HF_HOME", "/cache/hf"),), backoff_limit=1, active_deadline_seconds=86400,
    ttl_seconds_after_finished=3600, owner="alice",
)
LABELS = {**MANAGED, "owner": "alice"}
EXPECTED_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "bert-finetune", "namespace": "team-nlp", "labels": LABELS},
    "spec": {
        "backoffLimit": 1,
        "activeDeadlineSeconds": 86400,
        "ttlSecondsAfterFinished": 3600,
        "template": {
            "metadata": {"labels": LABELS},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "train",
                    "image": DEFAULT_IMAGE,
                    "command": ["python", "train.py", "--epochs", "3"],
                    "env": [
                        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"},
                        {"name": "NCCL_DEBUG", "value": "INFO"},
                        {"name": "HF_HOME", "value": "/cache/hf"},
                    ],
                    "resources": {
                        "requests": {"cpu": "8", "memory": "64Gi"},
                        "limits": {"memory": "64Gi", "nvidia.com/gpu": 2},
                    },
                    "volumeMounts": DSHM_MOUNT,
                }],
                "volumes": DSHM,
            },
        },
    },
}

# Distributed training: four pods of eight GPUs, one Indexed Job and its headless Service.
DISTRIBUTED_REQUEST = JobRequest(
    name="llama-ddp", namespace="research", command="torchrun --nnodes=$WORLD_SIZE train.py", gpus=8, workers=4,
    presets=(("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_DISABLE", "1")), owner="dmitri",
)
DIST_LABELS = {**MANAGED, "owner": "dmitri"}
EXPECTED_INDEXED_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "llama-ddp", "namespace": "research", "labels": DIST_LABELS},
    "spec": {
        "backoffLimit": 2,
        "completionMode": "Indexed",
        "completions": 4,
        "parallelism": 4,
        "template": {
            "metadata": {"labels": {**DIST_LABELS, "app.kubernetes.io/instance": "llama-ddp"}},
            "spec": {
                "restartPolicy": "Never",
                "subdomain": "llama-ddp",
                "containers": [{
                    "name": "train",
                    "image": DEFAULT_IMAGE,
                    "command": ["/bin/sh", "-c", "torchrun --nnodes=$WORLD_SIZE train.py"],
                    "env": [
                        {"name": "MASTER_ADDR", "value": "llama-ddp-0.llama-ddp"},
                        {"name": "MASTER_PORT", "value": "29500"},
                        {"name": "WORLD_SIZE", "value": "4"},
                        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                        {"name": "NPROC_PER_NODE", "value": "8"},
                        {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                        {"name": "NCCL_IB_DISABLE", "value": "1"},
                    ],
                    "resources": {"limits": {"nvidia.com/gpu": 8}},
                    "volumeMounts": DSHM_MOUNT,
                }],
                "volumes": DSHM,
            },
        },
    },
}
EXPECTED_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "llama-ddp", "namespace": "research", "labels": DIST_LABELS},
    "spec": {
        "clusterIP": "None",
        "selector": {"app.kubernetes.io/instance": "llama-ddp"},
        "publishNotReadyAddresses": True,
        "ports": [{"name": "torchrun", "port": 29500, "targetPort": 29500}],
    },
}

# Periodic evaluation on one MIG device, no overlapping runs.
CRON_REQUEST = JobRequest(
    name="nightly-eval", namespace="inference", image="nvcr.io/nvidia/tritonserver:24.05-py3", command="",
    gpus=1, mig_profile="1g.10gb", memory="16Gi", schedule="0 2 * * *", concurrency_policy="Forbid", owner="kenji",
)
CRON_LABELS = {**MANAGED, "owner": "kenji"}
EXPECTED_CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "nightly-eval", "namespace": "inference", "labels": CRON_LABELS},
    "spec": {
        "schedule": "0 2 * * *",
        "concurrencyPolicy": "Forbid",
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "jobTemplate": {
            "metadata": {"labels": CRON_LABELS},
            "spec": {
                "backoffLimit": 2,
                "template": {
                    "metadata": {"labels": CRON_LABELS},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "train",
                            "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
                            "resources": {
                                "requests": {"memory": "16Gi"},
                                "limits": {"memory": "16Gi", "nvidia.com/mig-1g.10gb": 1},
                            },
                            "volumeMounts": DSHM_MOUNT,
                        }],
                        "volumes": DSHM,
                    },
                },
            },
        },
    },
}


def test_a_job_is_exactly_this_manifest() -> None:
    assert validate(JOB_REQUEST) == {}
    assert manifests(JOB_REQUEST) == [EXPECTED_JOB]


def test_distributed_training_is_an_indexed_job_with_a_headless_service() -> None:
    assert validate(DISTRIBUTED_REQUEST) == {}
    assert manifests(DISTRIBUTED_REQUEST) == [EXPECTED_INDEXED_JOB, EXPECTED_SERVICE]
    assert DISTRIBUTED_REQUEST.total_gpus == 32


def test_a_schedule_makes_a_cronjob() -> None:
    assert validate(CRON_REQUEST) == {}
    assert CRON_REQUEST.kind == "CronJob"
    assert manifests(CRON_REQUEST) == [EXPECTED_CRONJOB]


def test_a_distributed_cronjob_finds_pod_zero_of_each_run_by_its_job_name() -> None:
    req = JobRequest("weekly-ddp", "research", gpus=4, workers=2, schedule="@weekly")
    cron, service = manifests(req)
    env = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0] == {"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}}
    assert env[1] == {"name": "MASTER_ADDR", "value": "$(JOB_NAME)-0.weekly-ddp"}
    assert service["spec"]["selector"] == {"app.kubernetes.io/instance": "weekly-ddp"}


def test_yaml_is_what_is_sent() -> None:
    text = to_yaml(manifests(DISTRIBUTED_REQUEST))
    assert text.startswith("apiVersion: batch/v1\nkind: Job\n")
    assert "\n---\n" in text
    assert list(yaml.safe_load_all(text)) == [EXPECTED_INDEXED_JOB, EXPECTED_SERVICE]


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"name": "Bad_Name"}, "name", "only lowercase a-z, 0-9 and '-'"),
    ({"name": ""}, "name", "required"),
    ({"name": "x" * 64}, "name", "at most 63 characters"),
    ({"name": "x" * 53, "schedule": "0 * * * *"}, "name", "at most 52 characters for a CronJob"),
    ({"name": "9lives", "workers": 2}, "name", "start it with a letter"),
    ({"namespace": "Team NLP"}, "namespace", "RFC 1123"),
    ({"image": "nvcr.io/nvidia/pytorch:24.10 py3"}, "image", "not an image reference"),
    ({"image": ""}, "image", "required"),
    ({"gpus": 65}, "gpus", "between 0 and 64"),
    ({"gpus": -1}, "gpus", "between 0 and 64"),
    ({"mig_profile": "9g.99gb"}, "mig_profile", "not a MIG profile"),
    ({"mig_profile": "1g.10gb", "gpus": 8}, "gpus", "1 to 7 MIG devices"),
    ({"cpu": "eight"}, "cpu", "not a CPU amount"),
    ({"cpu": "0"}, "cpu", "not a CPU amount"),
    ({"memory": "64GB"}, "memory", 'like "64Gi"'),
    ({"memory": "64"}, "memory", "did you mean 64Gi?"),
    ({"workers": 0}, "workers", "between 1 and 256"),
    ({"schedule": "* * *"}, "schedule", "needs 5 fields"),
    ({"schedule": "61 * * * *"}, "schedule", "not a cron schedule"),
    ({"schedule": "@reboot"}, "schedule", "unknown macro"),
    ({"schedule": "0 0 L * *"}, "schedule", "no L, W or #"),
    ({"concurrency_policy": "Sometimes"}, "concurrency_policy", "Forbid, Allow, Replace"),
    ({"backoff_limit": -1}, "backoff_limit", "between 0 and 100"),
    ({"active_deadline_seconds": 0}, "active_deadline_seconds", "more than 0"),
    ({"ttl_seconds_after_finished": -5}, "ttl_seconds_after_finished", "0 or more"),
    ({"owner": "alice smith"}, "owner", "a label value"),
    ({"presets": (("NCCL_DEBUG", "LOUD"),)}, "env:NCCL_DEBUG", "VERSION, WARN, INFO, TRACE"),
    ({"presets": (("NVIDIA_DRIVER_CAPABILITIES", "compute,graphix"),)}, "env:NVIDIA_DRIVER_CAPABILITIES", "graphix"),
    ({"presets": (("CUDA_VISIBLE_DEVICES", "first"),)}, "env:CUDA_VISIBLE_DEVICES", "GPU indexes"),
    ({"presets": (("NCCL_IB_DISABLE", "yes"),)}, "env:NCCL_IB_DISABLE", "1 (use sockets"),
    ({"env": (("1BAD", "x"),)}, "env", "not a variable name"),
    ({"env": (("MASTER_ADDR", "x"),), "workers": 2}, "env", "set for distributed training already"),
])
def test_each_field_is_refused_with_its_own_message(change, field, words) -> None:
    fields = {f: getattr(JOB_REQUEST, f) for f in JobRequest.__slots__}
    problems = validate(JobRequest(**{**fields, **change}))
    assert field in problems, problems
    assert words in problems[field]
    assert "\n" not in problems[field]


def test_next_three_runs_of_a_schedule() -> None:
    now = datetime(2026, 11, 16, 14, 30, tzinfo=UTC).timestamp()
    runs = [datetime.fromtimestamp(t, UTC).strftime("%d %H:%M") for t in next_runs("0 2 * * *", now, 3)]
    assert runs == ["17 02:00", "18 02:00", "19 02:00"]
    assert cron_expression("@hourly") == "0 * * * *"
    with pytest.raises(ValueError, match="5 fields"):
        next_runs("* * *", now)


def test_the_form_reads_text_fields() -> None:
    req, problems = from_form({
        "name": "ddp", "namespace": "research", "image": DEFAULT_IMAGE, "command": '["python", "train.py"]',
        "gpus": "8", "workers": "2", "backoff_limit": "0", "active_deadline_seconds": "", "env": "A=1 B='two words'",
        "env:NCCL_DEBUG": "WARN", "schedule": "  0  3 * * * ",
    })
    assert problems == {}
    assert req.command == ("python", "train.py") and req.workers == 2 and req.backoff_limit == 0
    assert req.env == (("A", "1"), ("B", "two words")) and req.presets == (("NCCL_DEBUG", "WARN"),)
    assert req.schedule == "0 3 * * *" and req.active_deadline_seconds is None
    _req, problems = from_form({"name": "x", "gpus": "two", "workers": "", "env": "NOVALUE", "command": "[python"})
    assert problems == {"gpus": "not a whole number", "workers": "required", "backoff_limit": "required",
                        "command": 'a list is JSON: ["python", "train.py"]', "env": "'NOVALUE' is not KEY=VALUE"}
    assert parse_command("python train.py --lr 3e-4") == "python train.py --lr 3e-4"
    assert parse_env("") == ()
