"""Multi-step wizards pushed over the panes: launching GPU instances (``n`` on Instances)."""

from __future__ import annotations

from gpuconsole.ui.wizards.provision import ProvisionWizard, open_provision_wizard

__all__ = ["ProvisionWizard", "open_provision_wizard"]
