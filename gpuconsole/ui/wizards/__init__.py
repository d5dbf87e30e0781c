"""Multi-step wizards pushed over the panes: launching GPU instances (``n`` on Instances),
submitting a job (``N`` on Jobs: a batch Job, an MPIJob or a PyTorchJob)."""

from __future__ import annotations

from gpuconsole.ui.wizards.distributed import DistributedWizard  # the submit wizard's other kinds
from gpuconsole.ui.wizards.provision import ProvisionWizard, open_provision_wizard

__all__ = ["DistributedWizard", "ProvisionWizard", "open_provision_wizard"]
