"""Operations: every change to the fleet, each through the one action path.

    actions: the action path itself (request, confirmation check, backend call, result).
    cloud_ops, provision, launch_request: instances, the launch wizard's logic, the request it sends.
    job_ops, manifests: Kubernetes jobs submitted, deleted, suspended; their manifests checked.
    gpu_ops: GPU processes signalled and each GPU's recent minutes.
    budget_ops, budget_actions, budget_notify: budgets that act (stop, suspend, notify).
    experiments: one workload on several instance types, compared on cost per result.
"""
