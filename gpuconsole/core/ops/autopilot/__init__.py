"""The autopilot: rules that scale pools, stop idle GPUs and recover spot work on their own.

Modules: :mod:`expr` (the rule language), :mod:`rules` (rules from the config file and the
database), :mod:`figures` (a pool's live figures), :mod:`engine` (decisions), :mod:`state`
(cooldowns and pauses across restarts), :mod:`actuator` (decisions through the action path),
:mod:`leader` (one replica acts), :mod:`loading` (where rules and state live).
"""
